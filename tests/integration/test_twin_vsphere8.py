"""The twin as a vCenter 8.0.3 with HGX hosts: version negotiation and vendor device groups.

The twin of inventories/hgx-h200-4node.yaml answers as a real 8.0.3 vCenter does (AboutInfo,
/sdk/vimServiceVersions.xml, so pyVmomi negotiates urn:vim25/8.0.3.0), and each ESXi 8.0.3
host lists its HGX board's Fabric Manager partitions as vendor device groups, through
HostAssignableHardwareManager.RetrieveVendorDeviceGroupInfo and
QueryConfigTarget().vendorDeviceGroupInfo, read here with pyVmomi's own 8.0.0.1 types. The
r750xa-shaped lab on 7.0.3 has none of it. Clients nobody here wrote (pyVmomi's property
reads, community.vmware) still read the 8.0.3 twin without a handler panic.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from provision.discovery import discover
from rackcert.core.device_groups import partition_group_name, partition_of_group
from rackcert.core.errors import InputError
from rackcert.core.paths import inventories_dir
from rackcert.core.spec_loader import load_spec
from rackcert.lab import twin
from tests.support.spec_helpers import example_data, write_spec
from tests.support.twin_judges import Judge, find, read_sweep, run_modules, task_fault

HGX = str(inventories_dir() / "hgx-h200-4node.yaml")
LAB = "inventories/lab.yaml"
LAB_PATH = inventories_dir() / "lab.yaml"


def _groups_by_host(si):
    from pyVmomi import vim

    view = si.content.viewManager.CreateContainerView(si.content.rootFolder, [vim.HostSystem], True)
    try:
        hosts = list(view.view)
    finally:
        view.Destroy()
    return {h.name: h for h in hosts}


def test_an_803_twin_negotiates_803_and_lists_each_hosts_partitions(rack_twin):
    lab = rack_twin(HGX)
    spec = lab.spec
    board = spec.hardware_profiles[0].board
    assert board is not None
    with lab.connect() as si:
        about = si.content.about
        assert (about.version, about.build, about.apiVersion) == ("8.0.3", "24022515", "8.0.3.0")
        assert about.licenseProductVersion == "8.0"
        assert si._stub.versionId.strip('"') == "urn:vim25/8.0.3.0"  # negotiated namespace
        inv = discover(si)
        hosts = _groups_by_host(si)
        cluster = hosts[spec.hosts[0].address].parent
        for name, host in hosts.items():
            groups = host.configManager.assignableHardwareManager.RetrieveVendorDeviceGroupInfo()
            names = [g.deviceGroupName for g in groups]
            assert names == [partition_group_name(board.name, p.id) for p in board.partitions]
            sizes = Counter(len(g.componentDeviceInfo) for g in groups)
            assert sizes == {8: 1, 4: 2, 2: 4, 1: 8}, name  # Fabric Manager's H200 8-GPU table
            for group in groups:
                ident = partition_of_group(group.deviceGroupName)
                part = board.partition(ident) if ident is not None else None
                assert part is not None and len(group.componentDeviceInfo) == len(part.modules)
                for member in group.componentDeviceInfo:
                    assert member.type == "nvidiaVgpu" and member.isConfigurable is True
                    assert member.vendorName == "NVIDIA Corporation"
                    assert member.device.backing.vgpu == "grid_h200x-141c"
            target = cluster.environmentBrowser.QueryConfigTarget(host=host)
            assert [g.deviceGroupName for g in target.vendorDeviceGroupInfo] == names
            # The simulator's own answer is still there (the vGPU profile the host offers).
            assert [t.vgpu for t in target.sharedGpuPassthroughTypes] == ["grid_h200x-141c"]
    assert inv.api_version == "8.0.3.0"
    seen = {(h.esxi_version, h.esxi_build, h.api_version) for h in inv.hosts}
    assert seen == {("8.0.3", "24022510", "8.0.3.0")}
    assert twin.handler_panics(lab.twin.files.workdir) == []


def test_a_pcie_pair_on_803_is_a_passthrough_group_and_703_has_no_groups(rack_twin, tmp_path):
    data = example_data(LAB_PATH)
    data["vcenter"]["version"] = "8.0.3"
    for host in data["hosts"]:
        host["esxi_version"] = "8.0.3"
    lab8 = rack_twin(str(write_spec(tmp_path, data, "lab803.yaml")))
    lab7 = rack_twin(LAB)
    with lab8.connect() as si:
        host = next(iter(_groups_by_host(si).values()))
        groups = host.configManager.assignableHardwareManager.RetrieveVendorDeviceGroupInfo()
        assert [g.deviceGroupName for g in groups] == [
            "NVIDIA NVLink pair 0000:17:00.0+0000:31:00.0"
        ]
        members = groups[0].componentDeviceInfo
        assert [m.type for m in members] == ["pciPassthru", "pciPassthru"]
        assert [m.device.backing.id for m in members] == ["0000:17:00.0", "0000:31:00.0"]
    with lab7.connect() as si:
        assert si.content.about.apiVersion == "7.0.3.0"
        host = next(iter(_groups_by_host(si).values()))
        assert host.configManager.assignableHardwareManager is None
        target = host.parent.environmentBrowser.QueryConfigTarget(host=host)
        assert not target.vendorDeviceGroupInfo


def test_the_twin_names_the_releases_it_stands_for(tmp_path: Path):
    spec = load_spec(HGX).spec
    spec.vcenter.version = "8.0.2"
    with pytest.raises(InputError, match=r"vcenter.version 8.0.2: the twin stands for vCenter"):
        twin.description_from_spec(spec, twin.TwinFiles.in_dir(tmp_path))


def test_clients_nobody_here_wrote_read_the_803_twin(rack_twin, tmp_path: Path):
    from pyVmomi import vim

    lab = rack_twin(HGX)
    with lab.connect() as si:
        sweep = read_sweep(si)
        host = find(si, vim.HostSystem, lab.spec.hosts[0].address)
        assert host.configManager.assignableHardwareManager is not None
    assert sweep.dropped == [] and sweep.internal == [] and sweep.dangling == []
    assert sweep.objects > 100
    spec = lab.spec
    judges = [
        Judge("vmware_about_info", {}),
        Judge("vmware_cluster_info", {"cluster_name": spec.vcenter.cluster}),
        Judge("vmware_host_config_info", {"cluster_name": spec.vcenter.cluster}),
        Judge("vmware_host_facts", {"esxi_hostname": spec.hosts[0].address}, label="facts"),
    ]
    results = run_modules(lab, judges, tmp_path / "judges")
    failed = {k: str(v.get("msg", ""))[:300] for k, v in results.items() if v.get("failed")}
    assert failed == {}
    about = results["vmware_about_info"]["about_info"]
    assert (about["version"], about["api_version"]) == ("8.0.3", "8.0.3.0")
    assert results["facts"]["ansible_facts"]["ansible_distribution_version"] == "8.0.3"
    assert twin.handler_panics(lab.twin.files.workdir) == []


# -- a VM takes a device group: ConfigSpec.deviceGroups and its rules -------------------------
H1 = "hgx01.example.internal"
VGPU = "grid_h200x-141c"


def _vm(name: str) -> dict:
    return {
        "name": name,
        "host": H1,
        "cpus": 8,
        "memory_mb": 16384,
        "firmware": "efi",
        "disk_gb": 10,
    }


def _take(vm, name: str, size: int, *, members: int | None = None, key: int = 1):
    """ReconfigVM_Task as a vSphere 8 client sends it: the group and its vGPUs, one request."""
    from pyVmomi import vim

    changes = []
    for seq in range(size if members is None else members):
        dev = vim.vm.device.VirtualPCIPassthrough(
            key=-100 - seq,
            backing=vim.vm.device.VirtualPCIPassthrough.VmiopBackingInfo(vgpu=VGPU),
            deviceGroupInfo=vim.vm.device.VirtualDevice.DeviceGroupInfo(
                groupInstanceKey=key, sequenceId=seq
            ),
        )
        changes.append(vim.vm.device.VirtualDeviceSpec(operation="add", device=dev))
    groups = vim.vm.VirtualDeviceGroups(
        deviceGroup=[
            vim.vm.VirtualDeviceGroups.VendorDeviceGroup(groupInstanceKey=key, deviceGroupName=name)
        ]
    )
    spec = vim.vm.ConfigSpec(
        deviceGroups=groups, deviceChange=changes, memoryReservationLockedToMax=True
    )
    return task_fault(vm.ReconfigVM_Task(spec=spec))


def _read_paths(si, vm) -> tuple[str, list[int]]:
    """config.deviceGroups and config.hardware.device by name, through the PropertyCollector."""
    from pyVmomi import vim, vmodl

    spec = vmodl.query.PropertyCollector.FilterSpec(
        objectSet=[vmodl.query.PropertyCollector.ObjectSpec(obj=vm)],
        propSet=[
            vmodl.query.PropertyCollector.PropertySpec(
                type=vim.VirtualMachine, pathSet=["config.deviceGroups", "config.hardware.device"]
            )
        ],
    )
    result = si.content.propertyCollector.RetrievePropertiesEx(
        [spec], vmodl.query.PropertyCollector.RetrieveOptions()
    )
    props = {p.name: p.val for p in result.objects[0].propSet}
    name = props["config.deviceGroups"].deviceGroup[0].deviceGroupName
    seqs = [
        d.deviceGroupInfo.sequenceId for d in props["config.hardware.device"] if d.deviceGroupInfo
    ]
    return name, seqs


def _vgpus(vm) -> list:
    from pyVmomi import vim

    return [
        d for d in vm.config.hardware.device if isinstance(d, vim.vm.device.VirtualPCIPassthrough)
    ]


def test_a_vm_takes_a_partition_whole_and_its_membership_is_fixed(rack_twin):
    from pyVmomi import vim

    lab = rack_twin(
        HGX, vms=[_vm("a"), _vm("b")], host_desc={H1: {"graphics_type": "sharedDirect"}}
    )
    board = lab.spec.hardware_profiles[0].board
    assert board is not None
    p1, p3 = (partition_group_name(board.name, i) for i in (1, 3))
    with lab.connect() as si:
        a, b = find(si, vim.VirtualMachine, "a"), find(si, vim.VirtualMachine, "b")
        fault = _take(a, p3, 2, members=1)
        assert (
            "has 2 devices: the request must add all of them, sequenceId 0 to 1, in one"
            in fault.msg
        )
        fault = _take(a, "NVIDIA HGX H200 8-GPU partition-99", 1)
        assert "is not a vendor device group of host hgx01.example.internal" in fault.msg
        assert _vgpus(a) == []  # a refused request changes nothing
        assert _take(a, p3, 2) is None
        members = _vgpus(a)
        assert [m.backing.vgpu for m in members] == [VGPU, VGPU]
        # Read back as any vSphere 8 client reads it: config.deviceGroups, deviceGroupInfo.
        held = a.config.deviceGroups.deviceGroup
        assert [(type(g).__name__, g.deviceGroupName) for g in held] == [
            ("vim.vm.VirtualDeviceGroups.VendorDeviceGroup", p3)
        ]
        infos = [
            (m.deviceGroupInfo.groupInstanceKey, m.deviceGroupInfo.sequenceId) for m in members
        ]
        assert infos == [(held[0].groupInstanceKey, 0), (held[0].groupInstanceKey, 1)]
        assert _read_paths(si, a) == (p3, [0, 1])
        assert b.config.deviceGroups is None  # unset: b holds none
        sweep = read_sweep(si)  # every property of every object, a VM holding a group among them
        assert sweep.dropped == [] and sweep.internal == [] and sweep.dangling == []
        # Membership cannot change: not the same group again, no device into it, none out of it.
        assert "already holds device group" in _take(a, p3, 2).msg
        join = vim.vm.device.VirtualDeviceSpec(
            operation="add",
            device=vim.vm.device.VirtualPCIPassthrough(
                key=-300,
                backing=vim.vm.device.VirtualPCIPassthrough.VmiopBackingInfo(vgpu=VGPU),
                deviceGroupInfo=vim.vm.device.VirtualDevice.DeviceGroupInfo(
                    groupInstanceKey=1, sequenceId=2
                ),
            ),
        )
        fault = task_fault(a.ReconfigVM_Task(spec=vim.vm.ConfigSpec(deviceChange=[join])))
        assert "a device joins a group only with the group, in one request" in fault.msg
        leave = vim.vm.device.VirtualDeviceSpec(operation="remove", device=members[0])
        fault = task_fault(a.ReconfigVM_Task(spec=vim.vm.ConfigSpec(deviceChange=[leave])))
        assert "are removed together, in one request (it removes 1)" in fault.msg
        assert len(_vgpus(a)) == 2
        # One powered-on VM per partition: b's partition-1 (modules 1-4) shares GPUs with a's.
        assert _take(b, p1, 4) is None
        assert task_fault(a.PowerOnVM_Task()) is None
        fault = task_fault(b.PowerOnVM_Task())
        assert (
            f'device group "{p1}" shares GPU 0000:1b:00.0 with group "{p3}" of powered-on VM a'
            in (fault.msg)
        )
        assert b.runtime.powerState == "poweredOff"
        # Both members out together: the group is gone and may be taken again.
        task_fault(a.PowerOffVM_Task())
        both = [vim.vm.device.VirtualDeviceSpec(operation="remove", device=m) for m in members]
        assert task_fault(a.ReconfigVM_Task(spec=vim.vm.ConfigSpec(deviceChange=both))) is None
        assert _vgpus(a) == []
        assert task_fault(b.PowerOnVM_Task()) is None
    assert twin.handler_panics(lab.twin.files.workdir) == []


def test_a_vgpu_group_needs_the_hosts_vgpu_manager(rack_twin):
    from pyVmomi import vim

    # A host without the NVIDIA vGPU manager offers no vGPU profile (and lists no VIB for it).
    lab = rack_twin(
        HGX, vms=[_vm("a")], host_desc={H1: {"graphics_type": "sharedDirect", "vgpu_types": []}}
    )
    board = lab.spec.hardware_profiles[0].board
    assert board is not None
    with lab.connect() as si:
        a = find(si, vim.VirtualMachine, "a")
        assert _take(a, partition_group_name(board.name, 7), 1) is None
        fault = task_fault(a.PowerOnVM_Task())
        assert "needs the NVIDIA vGPU manager, which host hgx01.example.internal does not run" in (
            fault.msg
        )
