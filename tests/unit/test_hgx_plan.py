"""`rackcert plan` on HGX hosts: each VM on its partition, shown with host and modules.

The planner is pure: these tests feed it the spec and what discovery would report for the
spec's hosts (the twin's device model, tests/support/discover_helpers.py), no vCenter.
"""

from __future__ import annotations

from provision.planner import plan
from rackcert.core.paths import inventories_dir
from tests.support.discover_helpers import inventory_of, spec_of
from tests.support.spec_helpers import example_data

HGX = inventories_dir() / "hgx-h200-4node.yaml"


def _uncloned(data):
    """VMs without a template source: plan shows each as one (blocked) vm.create."""
    for tmpl in data["vm_templates"]:
        tmpl["source"] = None
    return data


def test_plan_shows_host_partition_and_modules():
    spec = spec_of(_uncloned(example_data(HGX)))
    creates = {a.target: a for a in plan(spec, inventory_of(spec)) if a.kind == "vm.create"}
    assert len(creates) == 10
    pair_f = creates["pair-f"]
    assert pair_f.host == "hgx04.example.internal"
    assert pair_f.reason.endswith(
        "placement puts it on hgx04.example.internal with partition-6 (modules 6, 8): device"
        " group of 2 x vGPU grid_h200x-141c"
    )
    vgpu = {"backing": "vgpu", "role": "gpu", "vgpu": "grid_h200x-141c"}
    assert pair_f.params["device_group"] == {
        "name": "partition-6",
        "vendor_name": "NVIDIA HGX H200 8-GPU partition-6",
        "devices": [vgpu, vgpu],
        "partition": 6,
        "modules": [6, 8],
        "gpus": ["0000:c3:00.0", "0000:df:00.0"],
        "backing": "vgpu",
        "vgpu": "grid_h200x-141c",
    }
    eight = creates["train8-a"].params["device_group"]
    assert (eight["partition"], eight["modules"]) == (0, list(range(1, 9)))


def test_vgpu_hosts_get_shared_direct_graphics_first():
    spec = spec_of(_uncloned(example_data(HGX)))
    graphics = [a for a in plan(spec, inventory_of(spec)) if a.kind == "host.graphics"]
    assert len(graphics) == 4
    assert all("sharedDirect" in a.change for a in graphics)


def test_a_pcie_pair_on_vsphere_8_is_planned_as_a_device_group():
    data = _uncloned(example_data())
    data["vcenter"]["version"] = "8.0.3"
    for host in data["hosts"]:
        host["esxi_version"] = "8.0.3"
    spec = spec_of(data)
    creates = {a.target: a for a in plan(spec, inventory_of(spec)) if a.kind == "vm.create"}
    group = creates["s1-pair"].params["device_group"]
    assert group["name"] == "nvlink-pair 0000:b1:00.0+0000:ca:00.0"
    assert group["backing"] == "fixed" and group["partition"] is None
    assert "as nvlink-pair 0000:b1:00.0+0000:ca:00.0: device group of passthrough GPUs" in (
        creates["s1-pair"].reason
    )
    assert "device_group" not in creates["mn-node1"].params  # one GPU: no group


def test_the_r750xa_on_7_0_3_plans_no_device_group():
    spec = spec_of(_uncloned(example_data()))
    actions = plan(spec, inventory_of(spec))
    assert actions and not [a for a in actions if "device_group" in a.params]
    s1 = next(a for a in actions if a.target == "s1-pair")
    assert "(NVLink-bridged pair)" in s1.reason


def test_a_host_without_the_vgpu_manager_is_blocked_with_what_to_install():
    spec = spec_of(_uncloned(example_data(HGX)))
    inventory = inventory_of(spec)
    inventory.hosts[1].vgpu_types = []  # hgx02: no NVIDIA vGPU manager, so no profile offered
    blocked = [a for a in plan(spec, inventory) if a.kind == "host.vgpu_manager"]
    assert [a.target for a in blocked] == ["hgx02.example.internal"]
    assert blocked[0].change == "vGPU profile(s) grid_h200x-141c not offered (the host offers none)"
    assert "train4-a, train4-b" in blocked[0].reason
    assert blocked[0].blocked.startswith("install the NVIDIA vGPU manager VIB")
