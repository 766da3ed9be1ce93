"""The vSphere operations every provision step shares: tasks, lookups, device and option builders.

Why one module: host steps, VM steps and the new-VM lifecycle all wait on tasks, look up
managed objects by moid and build the same passthrough devices and extraConfig. Each of
them imports this module and nothing of the others, so provision has no import cycle.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rackcert.errors import RackcertError
from rackcert.stage_records import ActionRecord

Event = Callable[[str, ActionRecord | None, str], None]
"""apply's progress hook: (kind, action, detail), kind start/progress/done/skipped."""


class ApplyError(RackcertError):
    """A vCenter task failed or the connection dropped; what was done is recorded."""


def quiet(_event: str, _action: ActionRecord | None, _detail: str) -> None:
    return None


def wait_task(task: Any, what: str, on_event: Event = quiet, timeout: float = 3600) -> Any:
    """Wait for a vCenter task; its fault becomes an ApplyError with the fault's message."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        info = task.info
        if info.state == "success":
            return info.result
        if info.state == "error":
            fault = info.error
            msg = getattr(fault, "msg", None) or type(fault).__name__
            raise ApplyError(f"{what} failed: {msg}")
        if time.monotonic() > deadline:
            raise ApplyError(f"{what}: task {task._moId} still running after {timeout:.0f} s")
        on_event("progress", None, f"{what}: {info.progress or 0}%")
        time.sleep(delay)
        delay = min(delay * 2, 2.0)


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
