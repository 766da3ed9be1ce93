"""A VM of several vGPUs of one profile: the planner counts its devices, it does not set them.

Two vGPUs of `grid_a100d-40c` are two devices with one key (backing, profile); a set diff saw
one and planned nothing when the second was missing. The unit tests feed the pure planner
what discovery would report; the twin test removes a vGPU by hand and lets provision put it
back, read back with pyVmomi.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.support.plan_multi_vgpu import PROFILE, VGPU
from tests.support.plan_multi_vgpu import vgpu_data as _vgpu_data
from tests.support.vsphere_helpers import cli, plan_json


def _vgpu_spec(tmp_path: Path) -> Path:
    path = tmp_path / "lab-vgpu.yaml"
    path.write_text(yaml.safe_dump(_vgpu_data(), sort_keys=False))
    return path


def _vgpus(vm: Any) -> list[Any]:
    from pyVmomi import vim

    return [
        d
        for d in vm.config.hardware.device
        if isinstance(d, vim.vm.device.VirtualPCIPassthrough)
        and isinstance(d.backing, vim.vm.device.VirtualPCIPassthrough.VmiopBackingInfo)
    ]


def test_a_vgpu_removed_by_hand_is_planned_back_and_provision_restores_it(
    rack_twin, tmp_path, capsys
):
    from pyVmomi import vim

    from provision.apply import wait_task
    from tests.support.twin_judges import find

    lab = rack_twin(_vgpu_spec(tmp_path), guests=True)
    code, out, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err + out
    assert plan_json(lab, capsys)["actions"] == []
    with lab.connect() as si:
        vm = find(si, vim.VirtualMachine, "lab-node1")
        assert [d.backing.vgpu for d in _vgpus(vm)] == [PROFILE, PROFILE]
        # By hand, as an operator in the vSphere Client would: off, then one vGPU removed.
        wait_task(vm.PowerOffVM_Task(), "power off")
        gone = _vgpus(vm)[-1]
        remove = vim.vm.device.VirtualDeviceSpec(operation="remove", device=gone)
        wait_task(vm.ReconfigVM_Task(spec=vim.vm.ConfigSpec(deviceChange=[remove])), "remove")
        assert len(_vgpus(vm)) == 1
    actions = plan_json(lab, capsys)["actions"]
    reconfigure = [a for a in actions if a["kind"] == "vm.reconfigure"]
    assert [a["target"] for a in reconfigure] == ["lab-node1"]
    assert reconfigure[0]["params"]["add_devices"] == [VGPU]
    assert reconfigure[0]["params"]["remove_device_keys"] == []
    assert reconfigure[0]["change"] == f"add passthrough {PROFILE}"
    code, out, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err + out
    assert plan_json(lab, capsys)["actions"] == []
    with lab.connect() as si:
        vm = find(si, vim.VirtualMachine, "lab-node1")
        assert [d.backing.vgpu for d in _vgpus(vm)] == [PROFILE, PROFILE]
        assert vm.runtime.powerState == "poweredOn"
