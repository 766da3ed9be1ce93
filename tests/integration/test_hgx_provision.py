"""Provision the HGX H200 rack on the 8.0.3 twin: each VM takes its partition, then nothing is left.

Judged by what exists: pyVmomi reads every provisioned VM's config.deviceGroups and each
member's deviceGroupInfo back and checks them against the spec's placement and against the
device groups the twin's host lists.
"""

from __future__ import annotations

from rackcert.core.device_groups import wanted_group
from rackcert.core.paths import inventories_dir
from rackcert.core.placement import place
from rackcert.lab import twin
from tests.support.rehearse import round_trip as _round_trip
from tests.support.twin_judges import find
from tests.support.vsphere_helpers import cli, plan_json

HGX = str(inventories_dir() / "hgx-h200-4node.yaml")


def test_provision_gives_each_vm_its_partition_and_a_second_plan_is_empty(
    rack_twin, capsys, tmp_path
):
    from pyVmomi import vim

    lab = rack_twin(HGX, guests=True)
    code, out, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err + out
    assert plan_json(lab, capsys)["actions"] == []
    spec = lab.spec
    by_vm = {p.vm: p for p in place(spec)}
    with lab.connect() as si:
        for vm_spec in spec.vms:
            want = wanted_group(spec, by_vm[vm_spec.name])
            assert want is not None
            vm = find(si, vim.VirtualMachine, vm_spec.name)
            groups = vm.config.deviceGroups.deviceGroup
            assert [g.deviceGroupName for g in groups] == [want.vendor_name], vm_spec.name
            members = [d for d in vm.config.hardware.device if d.deviceGroupInfo]
            assert sorted(d.deviceGroupInfo.sequenceId for d in members) == list(
                range(len(want.gpus))
            )
            assert {d.deviceGroupInfo.groupInstanceKey for d in members} == {
                groups[0].groupInstanceKey
            }
            assert {d.backing.vgpu for d in members} == {want.vgpu}
            # The group is one the VM's host lists, with as many members as it has GPUs.
            host = vm.runtime.host
            listed = host.configManager.assignableHardwareManager.RetrieveVendorDeviceGroupInfo()
            offered = {g.deviceGroupName: g for g in listed}
            assert len(offered[want.vendor_name].componentDeviceInfo) == len(members)
            assert vm.runtime.powerState == "poweredOn"
    assert twin.handler_panics(lab.twin.files.workdir) == []
    # Capture reads the groups back; a twin serving the capture serves them as captured (its
    # capture equals the first), and the planner finds nothing to do there either.
    first = _round_trip(capsys, tmp_path, lab)
    hosts = {h["name"]: h for h in first["hosts"]}
    assert {len(h["device_groups"]) for h in hosts.values()} == {15}
    held = {v["name"]: v for v in first["vms"] if v["device_groups"]}
    assert set(held) == {v.name for v in spec.vms}
    for name, vm in held.items():
        want = wanted_group(spec, by_vm[name])
        assert want is not None and [g["name"] for g in vm["device_groups"]] == [want.vendor_name]
        members = [d for d in vm["devices"] if d.get("group_key") is not None]
        assert sorted(d["group_sequence"] for d in members) == list(range(len(want.gpus)))
    from provision.discovery import discover
    from provision.guestinfo import read_authorized_keys
    from provision.planner import plan
    from provision.session import connect
    from rackcert.core.capture.model import load_capture
    from rackcert.rehearse import twin_of

    replay = twin_of(load_capture(tmp_path / "first.json"), spec, tmp_path / "again")
    with replay as (_t, spec2), connect(spec2) as si:
        replayed = discover(si)
    keys = read_authorized_keys(spec2)
    assert plan(spec2, replayed, authorized_keys=keys) == []


def test_a_pcie_pair_rack_on_803_takes_its_pairs_as_device_groups(rack_twin, capsys, tmp_path):
    """inventories/lab.yaml (A100 PCIe pairs) on vSphere 8.0.3: each 2-GPU VM gets its bridged
    pair as a passthrough device group; a second plan is empty."""
    from pyVmomi import vim

    from tests.support.spec_helpers import LAB, example_data, write_spec

    data = example_data(LAB)
    data["vcenter"]["version"] = "8.0.3"
    for host in data["hosts"]:
        host["esxi_version"] = "8.0.3"
    lab = rack_twin(str(write_spec(tmp_path, data, "lab803.yaml")), guests=True)
    code, out, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err + out
    assert plan_json(lab, capsys)["actions"] == []
    by_vm = {p.vm: p for p in place(lab.spec)}
    grouped = [v.name for v in lab.spec.vms if wanted_group(lab.spec, by_vm[v.name])]
    assert grouped  # the lab's 2-GPU VMs hold bridged pairs
    with lab.connect() as si:
        for vm_spec in lab.spec.vms:
            want = wanted_group(lab.spec, by_vm[vm_spec.name])
            vm = find(si, vim.VirtualMachine, vm_spec.name)
            if want is None:
                assert vm.config.deviceGroups is None
                continue
            assert [g.deviceGroupName for g in vm.config.deviceGroups.deviceGroup] == [
                want.vendor_name
            ]
            members = [d for d in vm.config.hardware.device if d.deviceGroupInfo]
            assert sorted(d.backing.id for d in members) == sorted(want.gpus)
    assert twin.handler_panics(lab.twin.files.workdir) == []
