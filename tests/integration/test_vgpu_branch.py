"""gpu.vgpu.branch: a vGPU guest's driver is of its host's vGPU manager branch.

The guest side is the fake nvidia-smi of an HGX partition VM (tests/support/fakes, NVIDIA's `-q`
layout); the host side is what discovery recorded from esxcli `software vib list`, built here
as discovery records it, and read from the twin's hosts (ESXi 8.0: vGPU 17.x, R550; ESXi 7.0:
vGPU 16.x, R535) through a real `rackcert plan`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rackcert.core.paths import inventories_dir
from rackcert.core.results import Status
from rackcert.core.spec_loader import load_spec
from tests.support.hgx_checks import FAKE
from tests.support.hgx_checks import expect as _expect
from tests.support.hgx_checks import probe_outputs as _outputs
from tests.support.spec_helpers import LAB, example_data
from tests.support.vgpu_branch import HGX, R535, R550
from tests.support.vsphere_helpers import cli, last_record
from validation.checks import REGISTRY, NodeView, load_all, run_check
from validation.checks.match import driver_branch as branch
from validation.expect import VgpuManager, expectations
from validation.gather import Target
from validation.host_software import with_vgpu_managers
from validation.hypervisor_results import discovery_record


def _judge(manager: VgpuManager | None, vm: str = "pair-f", **knobs: str):
    load_all()
    expect = _expect(vm).model_copy(update={"vgpu_manager": manager})
    return run_check(REGISTRY["gpu.vgpu.branch"], NodeView(expect, _outputs(**knobs)))


def _answered(version: str) -> VgpuManager:
    return VgpuManager(host="hgx04", answered=True, version=version)


def test_a_guest_of_the_host_managers_branch_passes():
    res = _judge(_answered(R550))
    assert res.status is Status.passed, res
    assert res.observed == f"guest 550.127.05 (R550), host hgx04 manager {R550} (R550)"
    assert res.expected == "guest driver of branch R550"


@pytest.mark.parametrize(
    ("manager", "guest"),
    [(R535, "550.127.05"), (R550, "535.154.05"), (R550, "570.124.06")],
)
def test_a_guest_of_another_branch_fails(manager, guest):
    res = _judge(_answered(manager), FAKE_DRIVER=guest)
    assert res.status is Status.failed, res
    assert res.reason == "guest driver and host vGPU manager branches differ"
    assert res.fix.startswith("install the guest driver of the host manager's branch")


def test_a_host_that_did_not_answer_is_unknown_never_a_pass():
    res = _judge(VgpuManager(host="hgx04", why="no esxcli answer (HTTP 503)"))
    assert res.status is Status.error, res
    assert res.observed == "guest 550.127.05 (R550), host hgx04 unknown"
    assert res.reason == "host hgx04 did not answer esxcli: no esxcli answer (HTTP 503)"


def test_a_host_without_a_manager_vib_fails():
    res = _judge(_answered(""))
    assert res.status is Status.failed, res
    assert res.reason == "esxcli software vib list shows no NVD driver VIB"


def test_no_discovery_on_record_is_skipped_with_what_to_run():
    res = _judge(None)
    assert res.status is Status.skipped, res
    assert "run rackcert plan" in res.reason


def test_a_passthrough_vm_is_not_judged():
    load_all()
    spec = load_spec(inventories_dir() / "r750xa-4node.yaml").spec
    expect = next(iter(expectations(spec).values()))
    assert not expect.vgpu
    view = NodeView(expect.model_copy(update={"vgpu_manager": _answered(R550)}), _outputs())
    assert run_check(REGISTRY["gpu.vgpu.branch"], view).status is Status.skipped


def _managers_after_plan(lab, capsys) -> dict[str, VgpuManager | None]:
    """Each vGPU VM's host manager, as validate hands it on after a real `rackcert plan`."""
    code, _, err = cli(lab, capsys, "plan", str(lab.spec_path))
    assert code == 0, err
    found = discovery_record(lab.spec.metadata.name, None, lab.runs_dir)
    assert found is not None
    targets = [Target(expect=e) for e in expectations(lab.spec).values()]
    done = with_vgpu_managers(targets, lab.spec, found[0])
    return {t.expect.node: t.expect.vgpu_manager for t in done}


def test_the_twins_esxi_8_hosts_run_r550_and_its_7_0_hosts_r535(rack_twin, capsys, tmp_path):
    hgx = rack_twin(str(HGX))
    managers = _managers_after_plan(hgx, capsys)
    assert len(managers) == 10
    for vm, manager in managers.items():
        assert manager is not None and manager.answered, vm
        assert branch(manager.version) == "R550", (vm, manager)
    # validate hands the recorded manager to the check: the fake guest (R550) passes.
    tools = Path(tmp_path) / "tools"
    tools.mkdir()
    (tools / "nvidia-smi").symlink_to(FAKE)
    code, _, err = cli(
        hgx,
        capsys,
        "validate",
        str(hgx.spec_path),
        *("--local", "--node", "pair-f", "--check", "gpu.vgpu.branch"),
        *("--tool-path", str(tools), "--no-facts"),
    )
    assert code == 0, err
    results = last_record(hgx, "validate")["data"]["results"]
    assert [(r["id"], r["status"]) for r in results] == [("gpu.vgpu.branch", "pass")], results
    assert f"host hgx04 manager {R550} (R550)" in results[0]["observed"]
    data = example_data(LAB)
    data["vm_templates"][0].update(gpu_mode="vgpu", vgpu_profile="grid_a100d-40c")
    path = Path(tmp_path) / "lab-vgpu.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    managers = _managers_after_plan(rack_twin(path), capsys)
    assert {vm: m and m.version for vm, m in managers.items()} == {
        "lab-node1": R535,
        "lab-node2": R535,
    }
