"""Item 5: GPUDirect RDMA and NUMA. In the reference rack s1-pair, s3-pair-a and s3-pair-b get
their NVLink pair on NUMA node 1 and the only ConnectX-6 port, on node 0, with allowP2P set:
GPUDirect RDMA then crosses the socket link, which NCCL's defaults do not use. The plan says so
per VM; placement puts a VM with a passthrough NIC port on the port's node before a VM without
one; `gpu_nic_numa: required` refuses a placement that crosses nodes.
"""

from __future__ import annotations

from pathlib import Path

from rackcert.core.placement import gpudirect_warnings, place
from rackcert.core.spec import Spec
from tests.support.placement_numa import CROSSING
from tests.support.spec_helpers import example_data, mutated, write_spec


def _spec(edit=lambda d: None) -> Spec:
    return Spec.model_validate(mutated(example_data(), edit))


def test_the_plan_warns_per_vm_whose_gpus_and_nic_cross_numa_nodes():
    spec = _spec()
    warnings = gpudirect_warnings(spec, place(spec))
    assert {w.split(":")[0].removeprefix("VM ") for w in warnings} == CROSSING
    pair = next(w for w in warnings if w.startswith("VM s1-pair:"))
    assert "0000:b1:00.0, 0000:ca:00.0 on NUMA node 1" in pair
    assert "NIC port 0000:4b:00.1 on node 0" in pair and "NCCL" in pair


def test_a_vm_with_a_passthrough_nic_gets_the_gpus_next_to_it_first():
    def vmxnet3_first(d):
        # esx02: the two vmxnet3 VMs are listed before mn-node2, which has a NIC port.
        order = ["s2-single-a", "s2-single-b", "mn-node2"]
        d["vms"] = [v for v in d["vms"] if v["name"] not in order] + [
            next(v for v in d["vms"] if v["name"] == n) for n in order
        ]

    spec = _spec(vmxnet3_first)
    placements = {p.vm: p for p in place(spec)}
    assert placements["mn-node2"].gpus == ("0000:17:00.0",)  # node 0, the port's node
    assert placements["mn-node2"].numa == 0
    assert not [w for w in gpudirect_warnings(spec, place(spec)) if "mn-node2" in w]


def test_required_places_pair_and_port_on_one_node():
    def required(d):
        tmpl = next(t for t in d["vm_templates"] if t["name"] == "dl-2gpu-nvlink")
        tmpl["gpu_nic_numa"] = "required"

    spec = _spec(required)
    placements = {p.vm: p for p in place(spec)}
    for vm in CROSSING:
        assert placements[vm].gpus == ("0000:17:00.0", "0000:31:00.0"), vm
        assert placements[vm].numa == 0
    # The 1-GPU VMs on those hosts take node 1 instead: warned, not refused (preferred).
    warned = {w.split(":")[0].removeprefix("VM ") for w in gpudirect_warnings(spec, place(spec))}
    assert warned == {"mn-node1", "mn-node3", "mn-node4"}


def test_required_refuses_a_crossing_placement_at_spec_check(tmp_path: Path, capsys):
    from rackcert.cli import main

    def both_required(d):
        for tmpl in d["vm_templates"]:
            if tmpl["name"] in ("dl-1gpu", "dl-2gpu-nvlink"):
                tmpl["gpu_nic_numa"] = "required"

    path = write_spec(tmp_path, mutated(example_data(), both_required))
    code = main(["spec", "check", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    # mn-node1 (1 GPU, listed first) takes node 0's GPU; s1-pair's pair would cross nodes.
    assert err.strip().splitlines()[-1] == (
        f"error: {path}:117: vms[4].template: cannot place VM 's1-pair' on host 'esx01': no free"
        " NVLink-bridged GPU pair on host 'esx01' on the NUMA node(s) of a free passthrough NIC"
        " port (0): gpu_nic_numa: required keeps GPUDirect RDMA on one node"
    )
