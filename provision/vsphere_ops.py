"""The vSphere operations every provision step shares: tasks, lookups, device and option builders.

Why one module: host steps, VM steps and the new-VM lifecycle all wait on tasks, look up
managed objects by moid and build the same passthrough devices and extraConfig. Each of
them imports this module and nothing of the others, so provision has no import cycle.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rackcert.core.errors import RackcertError
from rackcert.core.stage_records import ActionRecord

Event = Callable[[str, ActionRecord | None, str], None]
"""apply's progress hook: (kind, action, detail), kind start/progress/done/skipped."""


class ApplyError(RackcertError):
    """A vCenter task failed or the connection dropped; what was done is recorded.

    `fault` is the task's own fault object when a task failed (None otherwise), so a step
    can tell DuplicateName from the rest.
    """

    def __init__(self, message: str, fault: Any = None) -> None:
        super().__init__(message)
        self.fault = fault


def quiet(_event: str, _action: ActionRecord | None, _detail: str) -> None:
    return None


# The longest pause between two reads of a task's state (seconds). A real rack's tasks take
# seconds to minutes, so 2 s costs little; a benchmark against a twin whose clock runs faster
# shrinks it with the clock (provision.pace.Pace.poll_s), or the polls would be the figure.
POLL_CAP_S = {"task": 2.0}


def set_poll_cap(seconds: float) -> None:
    POLL_CAP_S["task"] = seconds


def wait_task(task: Any, what: str, on_event: Event = quiet, timeout: float = 3600) -> Any:
    """Wait for a vCenter task; its fault becomes an ApplyError with the fault's message.

    While apply runs, one watcher reads every pending task at once (provision/taskwatch.py);
    otherwise, or when the watcher cannot read, this task's info is polled here.
    """
    deadline = time.monotonic() + timeout
    from provision.taskwatch import ACTIVE

    watcher = ACTIVE["watcher"]
    if watcher is not None and getattr(task, "_stub", None) is watcher.si._stub:
        entry = watcher.watch(task)
        try:
            while watcher.error is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ApplyError(
                        f"{what}: task {task._moId} still running after {timeout:.0f} s"
                    )
                entry.done.wait(min(left, 5.0))
                entry.done.clear()
                info = dict(entry.info)
                state = str(info.get("info.state", ""))
                if state == "success":
                    return info.get("info.result")
                if state == "error":
                    fault = info.get("info.error")
                    msg = getattr(fault, "msg", None) or type(fault).__name__
                    raise ApplyError(f"{what} failed: {msg}", fault)
                if info.get("info.progress") is not None:
                    on_event("progress", None, f"{what}: {info['info.progress']}%")
        finally:
            watcher.forget(task)
    delay = min(0.05, POLL_CAP_S["task"])
    while True:
        info = task.info
        if info.state == "success":
            return info.result
        if info.state == "error":
            fault = info.error
            msg = getattr(fault, "msg", None) or type(fault).__name__
            raise ApplyError(f"{what} failed: {msg}", fault)
        if time.monotonic() > deadline:
            raise ApplyError(f"{what}: task {task._moId} still running after {timeout:.0f} s")
        on_event("progress", None, f"{what}: {info.progress or 0}%")
        time.sleep(delay)
        delay = min(delay * 2, POLL_CAP_S["task"])


def host_ref(si: Any, moid: str) -> Any:
    from pyVmomi import vim

    return vim.HostSystem(moid, stub=si._stub)


def vm_ref(si: Any, moid: str) -> Any:
    from pyVmomi import vim

    return vim.VirtualMachine(moid, stub=si._stub)


def named(refs: Any, name: str, what: str, host: str) -> Any:
    """The managed object called `name` among `refs` (a host's datastores or networks)."""
    for ref in refs or []:
        if ref.name == name:
            return ref
    raise ApplyError(f"{host}: no {what} {name!r} (it was there when the plan was made)")


def datacenter_of(entity: Any) -> Any:
    from pyVmomi import vim

    while entity is not None and not isinstance(entity, vim.Datacenter):
        entity = entity.parent
    if entity is None:
        raise ApplyError("cannot find the datacenter of the host")
    return entity


def power_vm(vm: Any, name: str, on: bool, on_event: Event = quiet) -> None:
    """Power a VM on or off; at power-on ESXi checks its passthrough backings and reservation.

    A refusal (device not active, wrong systemId, device held by another powered-on VM,
    memory not fully reserved) fails the step with ESXi's own message, so a VM that could
    never start is not reported as provisioned.
    """
    if on:
        wait_task(vm.PowerOnVM_Task(), f"power on VM {name}", on_event)
    else:
        wait_task(vm.PowerOffVM_Task(), f"power off VM {name}", on_event)


def power_on_vm(vm: Any, name: str, on_event: Event = quiet) -> None:
    power_vm(vm, name, True, on_event)


def _signed16(value: int) -> int:
    return value - 0x10000 if value > 0x7FFF else value


def _system_ids(host: Any) -> dict[str, str]:
    """PCI id -> systemId of the host's active passthrough devices (QueryConfigTarget)."""
    target = host.parent.environmentBrowser.QueryConfigTarget(host=host)
    return {p.pciDevice.id: p.systemId for p in (target.pciPassthrough or [])}


def passthrough_specs(host: Any, host_name: str, devices: list[dict[str, Any]]) -> list[Any]:
    """Device changes adding the planned passthrough devices (fixed DirectPath or vGPU)."""
    from pyVmomi import vim

    vd = vim.vm.device
    system_ids = _system_ids(host) if any(d["backing"] == "fixed" for d in devices) else {}
    specs = []
    for i, dev in enumerate(devices):
        backing: Any
        if dev["backing"] == "vgpu":
            backing = vd.VirtualPCIPassthrough.VmiopBackingInfo(vgpu=dev["vgpu"])
        else:
            pci = dev["id"]
            if pci not in system_ids:
                raise ApplyError(
                    f"{host_name}: PCI device {pci} is not active for passthrough (enable it"
                    " and reboot the host, e.g. re-run provision with --power-cycle)"
                )
            # vSphere API reference, VirtualPCIPassthroughDeviceBackingInfo: deviceId is a
            # hex string, vendorId a signed 16-bit short, systemId from QueryConfigTarget.
            backing = vd.VirtualPCIPassthrough.DeviceBackingInfo(
                id=pci,
                deviceId=format(dev["device_id"], "x"),
                systemId=system_ids[pci],
                vendorId=_signed16(dev["vendor_id"]),
            )
        device = vd.VirtualPCIPassthrough(key=-100 - i, backing=backing)
        specs.append(vd.VirtualDeviceSpec(operation="add", device=device))
    return specs


def group_specs(host: Any, host_name: str, group: dict[str, Any]) -> tuple[Any, list[Any]]:
    """ConfigSpec.deviceGroups and the member devices of one vendor device group (API 8.0.0.1).

    vSphere API reference: a VM takes a group whole in one reconfiguration; the spec names
    it (VirtualDeviceGroups.VendorDeviceGroup: groupInstanceKey, deviceGroupName) and each
    member carries VirtualDevice.deviceGroupInfo (that groupInstanceKey, sequenceId 0..n-1).
    """
    from pyVmomi import vim

    instance = -1  # a new group's key, chosen by the client as new device keys are
    members = passthrough_specs(host, host_name, group["devices"])
    for seq, change in enumerate(members):
        change.device.key = -200 - seq
        change.device.deviceGroupInfo = vim.vm.device.VirtualDevice.DeviceGroupInfo(
            groupInstanceKey=instance, sequenceId=seq
        )
    groups = vim.vm.VirtualDeviceGroups(
        deviceGroup=[
            vim.vm.VirtualDeviceGroups.VendorDeviceGroup(
                groupInstanceKey=instance, deviceGroupName=group["vendor_name"]
            )
        ]
    )
    return groups, members


def extra_config(values: dict[str, str]) -> list[Any]:
    from pyVmomi import vim

    return [vim.option.OptionValue(key=k, value=v) for k, v in sorted(values.items())]


def _nic_backing(host: Any, name: str, host_name: str) -> Any:
    from pyVmomi import vim

    network: Any = named(host.network, name, "port group", host_name)
    if isinstance(network, vim.dvs.DistributedVirtualPortgroup):
        switch: Any = network.config.distributedVirtualSwitch  # set on every DV port group
        port = vim.dvs.PortConnection(portgroupKey=network.key, switchUuid=switch.uuid)
        return vim.vm.device.VirtualEthernetCard.DistributedVirtualPortBackingInfo(port=port)
    return vim.vm.device.VirtualEthernetCard.NetworkBackingInfo(deviceName=name, network=network)


def hardware_specs(vm: Any, host: Any, action: ActionRecord) -> list[Any]:
    """Disk grown and management NIC on its port group, as device changes of the VM."""
    from pyVmomi import vim

    vd = vim.vm.device
    out = []
    devices = list(vm.config.hardware.device)
    disk_want = action.params.get("disk")
    if disk_want:
        disk = next((d for d in devices if isinstance(d, vd.VirtualDisk)), None)
        if disk is None:
            raise ApplyError(f"VM {action.target} has no disk to grow")
        if disk.capacityInKB < disk_want["capacity_kb"]:
            disk.capacityInKB = disk_want["capacity_kb"]
            out.append(vd.VirtualDeviceSpec(operation="edit", device=disk))
    nic_want = action.params.get("nic")
    if nic_want:
        backing = _nic_backing(host, nic_want["network"], action.host)
        nic = next((d for d in devices if isinstance(d, vd.VirtualVmxnet3)), None)
        if nic is None:
            nic = vd.VirtualVmxnet3(key=-200, addressType="generated", backing=backing)
            out.append(vd.VirtualDeviceSpec(operation="add", device=nic))
        else:
            nic.backing = backing
            out.append(vd.VirtualDeviceSpec(operation="edit", device=nic))
    return out
