"""A VM of several vGPUs of one profile: the planner counts its devices, it does not set them.

Two vGPUs of `grid_a100d-40c` are two devices with one key (backing, profile); a set diff saw
one and planned nothing when the second was missing. The unit tests feed the pure planner
what discovery would report; the twin test removes a vGPU by hand and lets provision put it
back, read back with pyVmomi.
"""

from __future__ import annotations

from typing import Any

from provision.planner import plan
from provision.vmsettings import DeviceWant, device_diff
from rackcert.core.observed import ObservedVm, PassthroughDevice, VirtualDisk
from tests.support.discover_helpers import inventory_of, spec_of
from tests.support.plan_multi_vgpu import PROFILE, VGPU
from tests.support.plan_multi_vgpu import vgpu_data as _vgpu_data


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


def test_two_vgpus_of_one_profile_plan_two_adds():
    params = _reconfigure_of(0)
    assert params is not None
    assert params["add_devices"] == [VGPU, VGPU]
    assert params["remove_device_keys"] == []


def test_one_of_two_missing_plans_one_add():
    params = _reconfigure_of(1)
    assert params is not None
    assert params["add_devices"] == [VGPU]
    assert params["remove_device_keys"] == []


def test_a_third_copy_is_removed_the_last_added():
    params = _reconfigure_of(3)
    assert params is not None
    assert params["add_devices"] == []
    assert params["remove_device_keys"] == [13002]


def test_device_diff_counts_copies_of_one_key():
    vgpu = DeviceWant("vgpu", vgpu=PROFILE)
    other = DeviceWant("vgpu", vgpu="grid_a100d-20c")
    held = [
        PassthroughDevice(key=13001, backing="vgpu", vgpu=PROFILE),
        PassthroughDevice(key=13000, backing="vgpu", vgpu="grid_a100d-20c"),
    ]
    assert device_diff([vgpu, vgpu], held) == ([vgpu], [held[1]])
    assert device_diff([vgpu, other], held) == ([], [])
