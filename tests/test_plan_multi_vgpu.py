"""A VM of several vGPUs of one profile: the planner counts its devices, it does not set them.

Two vGPUs of `grid_a100d-40c` are two devices with one key (backing, profile); a set diff saw
one and planned nothing when the second was missing. The unit tests feed the pure planner
what discovery would report; the twin test removes a vGPU by hand and lets provision put it
back, read back with pyVmomi.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.planner import plan
from provision.vmsettings import DeviceWant, device_diff
from rackcert.core.observed import ObservedVm, PassthroughDevice, VirtualDisk
from tests.discover_helpers import inventory_of, spec_of
from tests.spec_helpers import LAB, example_data
from tests.vsphere_helpers import cli, plan_json

PROFILE = "grid_a100d-40c"
VGPU = {"backing": "vgpu", "role": "gpu", "vgpu": PROFILE}


def _vgpu_data() -> dict[str, Any]:
    """The lab rack (two A100 per 2-GPU VM, vSphere 7.0.3: no device group) in vGPU mode."""
    data = example_data(LAB)
    data["vm_templates"][0].update(gpu_mode="vgpu", vgpu_profile=PROFILE)
    return data


def _reconfigure_of(held: int) -> dict[str, Any] | None:
    """The params of lab-node1's vm.reconfigure when it holds `held` vGPUs (None: no action)."""
    spec = spec_of(_vgpu_data())
    inventory = inventory_of(spec)
    host = inventory.hosts[0].name
    inventory.vms = [
        ObservedVm(
            name=vm.name,
            moid=f"vm-{i}",
            host=inventory.hosts[i].name,
            power_state="poweredOff",
            firmware="efi",
            disks=[VirtualDisk(key=2000, capacity_gb=40, datastore="lab-ds")],
            passthrough=[
                PassthroughDevice(key=13000 + k, backing="vgpu", vgpu=PROFILE)
                for k in range(held if i == 0 else 2)
            ],
        )
        for i, vm in enumerate(spec.vms)
    ]
    assert inventory.vms[0].host == host
    found = [a for a in plan(spec, inventory) if a.kind == "vm.reconfigure"]
    node2 = next(a for a in found if a.target == "lab-node2")  # its vCPU, memory, extraConfig
    assert node2.params["add_devices"] == [] and node2.params["remove_device_keys"] == []
    return next((a.params for a in found if a.target == "lab-node1"), None)


@pytest.mark.unit
def test_two_vgpus_of_one_profile_plan_two_adds():
    params = _reconfigure_of(0)
    assert params is not None
    assert params["add_devices"] == [VGPU, VGPU]
    assert params["remove_device_keys"] == []


@pytest.mark.unit
def test_one_of_two_missing_plans_one_add():
    params = _reconfigure_of(1)
    assert params is not None
    assert params["add_devices"] == [VGPU]
    assert params["remove_device_keys"] == []


@pytest.mark.unit
def test_a_third_copy_is_removed_the_last_added():
    params = _reconfigure_of(3)
    assert params is not None
    assert params["add_devices"] == []
    assert params["remove_device_keys"] == [13002]


@pytest.mark.unit
def test_device_diff_counts_copies_of_one_key():
    vgpu = DeviceWant("vgpu", vgpu=PROFILE)
    other = DeviceWant("vgpu", vgpu="grid_a100d-20c")
    held = [
        PassthroughDevice(key=13001, backing="vgpu", vgpu=PROFILE),
        PassthroughDevice(key=13000, backing="vgpu", vgpu="grid_a100d-20c"),
    ]
    assert device_diff([vgpu, vgpu], held) == ([vgpu], [held[1]])
    assert device_diff([vgpu, other], held) == ([], [])


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


@pytest.mark.integration
def test_a_vgpu_removed_by_hand_is_planned_back_and_provision_restores_it(
    rack_twin, tmp_path, capsys
):
    from pyVmomi import vim

    from provision.apply import wait_task
    from tests.twin_judges import find

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
