"""GPU placement: NVLink pairs kept whole, NUMA near the NIC, auto VMs spread, deterministic."""

from __future__ import annotations

import pytest

from rackcert.core.placement import PlacementError, place
from rackcert.core.spec import Spec
from tests.support.spec_helpers import example_data, mutated


def _spec(edit=lambda d: None) -> Spec:
    return Spec.model_validate(mutated(example_data(), edit))


def _only(vms):
    def edit(d):
        d["vms"] = vms

    return edit


def test_pairs_go_to_two_gpu_vms_and_lone_gpus_reserve_their_partner():
    placements = {p.vm: p for p in place(_spec())}
    assert placements["s1-pair"].gpus == ("0000:b1:00.0", "0000:ca:00.0")
    assert placements["mn-node1"].gpus == ("0000:17:00.0",)
    # 0000:31:00.0 (partner of mn-node1's GPU) stays idle on esx01.
    used = {g for p in placements.values() if p.host == "esx01" for g in p.gpus}
    assert "0000:31:00.0" not in used


def test_gpus_near_the_nic_first():
    placements = place(
        _spec(
            _only(
                [
                    {
                        "name": "a",
                        "template": "dl-2gpu-nvlink",
                        "host": "esx01",
                        "address": "10.0.0.1",
                    },
                ]
            )
        )
    )
    assert placements[0].gpus == ("0000:17:00.0", "0000:31:00.0")
    assert placements[0].numa == 0 and placements[0].nic == "0000:4b:00.0"


def test_auto_vms_spread_over_hosts():
    vms = [
        {"name": f"n{i}", "template": "dl-1gpu", "host": "auto", "address": f"10.0.0.{i}"}
        for i in range(4)
    ]
    placements = place(_spec(_only(vms)))
    assert sorted(p.host for p in placements) == ["esx01", "esx02", "esx03", "esx04"]


def test_placement_is_deterministic():
    assert place(_spec()) == place(_spec())


def test_preferred_falls_back_to_any_two_gpus():
    def edit(d):
        d["vm_templates"][1]["nvlink"] = "preferred"
        for gpu in d["hardware_profiles"][0]["gpus"]:
            gpu["nvlink_peer"] = None
        d["vms"] = [{"name": "a", "template": "dl-2gpu-nvlink", "host": "esx01", "address": "x"}]

    (only,) = place(_spec(edit))
    assert len(only.gpus) == 2 and not only.nvlink_pair


def test_auto_vm_that_fits_nowhere_names_the_reason():
    vms = [
        {"name": f"n{i}", "template": "dl-2gpu-nvlink", "host": "auto", "address": f"10.0.0.{i}"}
        for i in range(9)
    ]
    with pytest.raises(PlacementError, match="cannot place VM 'n8' on any host"):
        place(_spec(_only(vms)))


def test_each_passthrough_nic_vm_gets_a_function_of_its_own():
    placements = {p.vm: p for p in place(_spec())}
    assert placements["mn-node1"].nic == "0000:4b:00.0"
    assert placements["s1-pair"].nic == "0000:4b:00.1"
    by_host: dict[str, list[str]] = {}
    for p in place(_spec()):
        if p.vm.startswith(("mn-", "s1-", "s3-")):
            by_host.setdefault(p.host, []).append(p.nic)
    assert all(len(nics) == len(set(nics)) for nics in by_host.values())


def test_more_passthrough_nic_vms_than_functions_is_refused():
    vms = [
        {"name": f"n{i}", "template": "dl-1gpu", "host": "esx02", "address": f"10.0.0.{i}"}
        for i in range(3)
    ]
    for vm in vms:
        vm["allow_split_pair"] = True
    with pytest.raises(PlacementError, match="has 2 passthrough NIC function") as exc:
        place(_spec(_only(vms)))
    assert "0000:4b:00.0, 0000:4b:00.1" in str(exc.value) and "nic: vmxnet3" in str(exc.value)
