"""What more than one test module needs from the old test_vsphere_poweron.py:
tests/integration/test_rehearse.py, tests/integration/test_vsphere_poweron.py.
"""

from __future__ import annotations

HOST = "lab-esx01.lab.internal"


def find(si, kind, name):

    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [kind], True)
    try:
        return next(o for o in view.view if o.name == name)
    finally:
        view.DestroyView()


def make_intruder(si, system_id: str, locked: bool = True):
    """A VM outside the spec holding lab-node1's first GPU, created powered off."""
    from pyVmomi import vim

    from provision.apply import wait_task

    host = find(si, vim.HostSystem, HOST)
    backing = vim.vm.device.VirtualPCIPassthrough.DeviceBackingInfo(
        id="0000:17:00.0", deviceId="20f1", systemId=system_id, vendorId=0x10DE
    )
    device = vim.vm.device.VirtualPCIPassthrough(key=-1, backing=backing)
    config = vim.vm.ConfigSpec(
        name="intruder",
        guestId="ubuntu64Guest",
        numCPUs=2,
        memoryMB=2048,
        memoryReservationLockedToMax=locked,
        files=vim.vm.FileInfo(vmPathName="[LocalDS_0]"),
        deviceChange=[vim.vm.device.VirtualDeviceSpec(operation="add", device=device)],
    )
    folder = host.parent.parent.parent.vmFolder
    task = folder.CreateVM_Task(config=config, pool=host.parent.resourcePool, host=host)
    return wait_task(task, "create intruder")
