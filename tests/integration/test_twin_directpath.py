"""Item 2 of the twin's conformance: ESXi's DirectPath I/O rules hold on every path.

VMware: a VM with DirectPath I/O devices supports no snapshots, no suspend and resume and no
vMotion; a passthrough device belongs to one powered-on VM; a running VM's memory cannot be
hot-removed; a VM cannot have more vCPUs than its host has logical processors. rackcert only
powers VMs on one at a time; an operator takes other paths, which the twin must refuse with the
fault vCenter gives. Each path is driven with pyVmomi calls shaped as govc's (the command in
each comment), against the rack that `rackcert provision` built.
"""

from __future__ import annotations

from typing import Any

from rackcert.lab import twin
from tests.support.twin_judges import find, task_fault
from tests.support.vsphere_helpers import cli

PAIR = "s1-pair"  # esx01: an NVLink pair of A100s and ConnectX-6 port 0000:4b:00.1


def _holder(si: Any, name: str, source: Any, device: Any, *, cpus: int = 2) -> Any:
    """A powered-off VM on `source`'s host holding `device` (a copy of its backing)."""
    from pyVmomi import vim

    host = source.runtime.host
    spec = vim.vm.ConfigSpec(
        name=name,
        guestId="ubuntu64Guest",
        numCPUs=cpus,
        memoryMB=2048,
        memoryReservationLockedToMax=True,
        files=vim.vm.FileInfo(vmPathName="[LocalDS_0]"),
    )
    if device is not None:
        copy = vim.vm.device.VirtualPCIPassthrough(key=-1, backing=device.backing)
        spec.deviceChange = [vim.vm.device.VirtualDeviceSpec(operation="add", device=copy)]
    folder = source.parent
    assert (
        task_fault(folder.CreateVM_Task(config=spec, pool=source.resourcePool, host=host)) is None
    )
    return find(si, vim.VirtualMachine, name)


def test_directpath_rules_hold_on_every_operator_path(rack_twin, capsys):
    from pyVmomi import vim

    lab = rack_twin(guests=True)
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err
    with lab.connect() as si:
        pair = find(si, vim.VirtualMachine, PAIR)
        assert pair.runtime.powerState == "poweredOn"
        devices = [
            d
            for d in pair.config.hardware.device
            if isinstance(d, vim.vm.device.VirtualPCIPassthrough)
        ]
        gpu, port = devices[0], devices[-1]
        assert port.backing.id == "0000:4b:00.1"
        datacenter = pair.parent.parent

        # govc vm.power -on -M gpu-thief port-thief: a second holder of a running VM's
        # GPU and of its NIC port is not powered on; vCenter lists it as not attempted.
        thieves = [_holder(si, "gpu-thief", pair, gpu), _holder(si, "port-thief", pair, port)]
        task = datacenter.PowerOnMultiVM_Task(vm=thieves)
        assert task_fault(task) is None
        result = task.info.result
        assert {v.vm._moId for v in result.notAttempted} == {t._moId for t in thieves}
        for info in result.notAttempted:
            assert isinstance(info.fault, vim.fault.GenericVmConfigFault)
            assert "already in use by virtual machine s1-pair" in info.fault.reason
        assert [t.runtime.powerState for t in thieves] == ["poweredOff", "poweredOff"]

        # govc vm.migrate -host esx02... s1-pair: no vMotion with a passthrough device.
        other = find(si, vim.HostSystem, "esx02.example.internal")
        spec = vim.vm.RelocateSpec(host=other, pool=other.parent.resourcePool)
        fault = task_fault(pair.RelocateVM_Task(spec=spec))
        assert isinstance(fault, vim.fault.DisallowedMigrationDeviceAttached), fault
        fault = task_fault(pair.MigrateVM_Task(host=other, priority="defaultPriority"))
        assert isinstance(fault, vim.fault.DisallowedMigrationDeviceAttached), fault
        assert pair.runtime.host.name == "esx01.example.internal"

        # govc snapshot.create -vm s1-pair before-upgrade: no snapshots.
        fault = task_fault(
            pair.CreateSnapshot_Task(name="before-upgrade", memory=False, quiesce=False)
        )
        assert isinstance(fault, vim.fault.SnapshotIncompatibleDeviceInVm), fault
        assert pair.snapshot is None

        # govc vm.power -suspend s1-pair: no suspend.
        fault = task_fault(pair.SuspendVM_Task())
        assert isinstance(fault, vim.fault.DeviceNotSupported), fault
        assert pair.runtime.powerState == "poweredOn"

        # govc vm.change -vm s1-pair -m 32768: memory is not hot-removed.
        memory = pair.config.hardware.memoryMB
        fault = task_fault(pair.ReconfigVM_Task(spec=vim.vm.ConfigSpec(memoryMB=memory // 2)))
        assert isinstance(fault, vmodl_fault("NotSupported")), fault
        assert pair.config.hardware.memoryMB == memory

        # govc vm.create -c 256 -on wide: more vCPUs than esx01's 128 logical processors.
        wide = _holder(si, "wide", pair, None, cpus=256)
        fault = task_fault(wide.PowerOnVM_Task())
        assert isinstance(fault, vim.fault.NotEnoughCpus), fault
        assert (fault.numCpuVm, fault.numCpuDest) == (256, 128)
        assert wide.runtime.powerState == "poweredOff"
    assert twin.handler_panics(lab.twin.files.workdir) == []


def vmodl_fault(name: str) -> Any:
    from pyVmomi import vmodl

    return getattr(vmodl.fault, name)
