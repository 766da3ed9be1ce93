"""A new VM's life in provision: clone the template, customize, power on, wait until it answers.

The planner's `vm.clone`, `vm.customize`, `vm.power_on` and `vm.wait` actions
are carried out here (apply.py dispatches to these functions):

- clone: `CloneVM_Task` of the template into the datacenter's VM folder with a
  RelocateSpec naming the planned host, the host's cluster resource pool and the
  spec's datastore, powered off and not as a template;
- customize: one `ReconfigVM_Task` with what rackcert computes (vCPUs, memory
  and its full reservation, EFI, passthrough devices, MMIO/P2P/NUMA extraConfig),
  the cloud-init guestinfo keys, the disk grown and the management NIC on its
  port group;
- power on: `PowerOnVM_Task`; vCenter's own checks (a device held by another
  VM, an inactive passthrough device) fault the task, which stops the run;
- wait: bounded, with progress, until VMware Tools reports the spec's address
  as `guest.ipAddress` or SSH answers there (`network.management.wait_for`).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

from provision.apply import (
    ApplyError,
    ApplyResult,
    Event,
    _datacenter,
    _device_specs,
    _extra,
    _host,
    _vm,
    wait_task,
)
from provision.planner import Action


def _named(refs: Any, name: str, what: str, host: str) -> Any:
    for ref in refs or []:
        if ref.name == name:
            return ref
    raise ApplyError(f"{host}: no {what} {name!r} (it was there when the plan was made)")


def clone(si: Any, action: Action, on_event: Event) -> str:
    """CloneVM_Task onto the planned host, pool and datastore; returns the new VM's moid."""
    from pyVmomi import vim

    p = action.params
    host = _host(si, p["host_moid"])
    template = _vm(si, p["template_moid"])
    datastore = _named(host.datastore, p["datastore"], "datastore", action.host)
    compute = host.parent
    relocate = vim.vm.RelocateSpec(host=host, pool=compute.resourcePool, datastore=datastore)
    spec = vim.vm.CloneSpec(location=relocate, powerOn=False, template=False)
    folder = _datacenter(compute).vmFolder
    task = template.CloneVM_Task(folder=folder, name=p["name"], spec=spec)
    made = wait_task(task, f"clone {p['template']} to VM {p['name']}", on_event)
    return made._moId


def _nic_backing(host: Any, name: str, host_name: str) -> Any:
    from pyVmomi import vim

    network = _named(host.network, name, "port group", host_name)
    if isinstance(network, vim.dvs.DistributedVirtualPortgroup):
        port = vim.dvs.PortConnection(
            portgroupKey=network.key,
            switchUuid=network.config.distributedVirtualSwitch.uuid,
        )
        return vim.vm.device.VirtualEthernetCard.DistributedVirtualPortBackingInfo(port=port)
    return vim.vm.device.VirtualEthernetCard.NetworkBackingInfo(deviceName=name, network=network)


def hardware_specs(vm: Any, host: Any, action: Action) -> list[Any]:
    """Disk grown and management NIC on its port group, as device changes of the clone."""
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


def customize(si: Any, action: Action, vm_moid: str, on_event: Event) -> None:
    """One ReconfigVM_Task: CPUs, locked memory, passthrough, extraConfig, guestinfo, disk, NIC."""
    from pyVmomi import vim

    want = action.params["desired"]
    vm = _vm(si, vm_moid)
    host = _host(si, action.params["host_moid"])
    changes = _device_specs(host, action.host, action.params["add_devices"])
    changes += hardware_specs(vm, host, action)
    config = vim.vm.ConfigSpec(
        numCPUs=want["num_cpus"],
        memoryMB=want["memory_mb"],
        firmware="efi",
        memoryReservationLockedToMax=True,
        extraConfig=_extra(action.params["extra_config"]),
        deviceChange=changes,
    )
    wait_task(vm.ReconfigVM_Task(spec=config), f"customize VM {want['name']}", on_event)


def power_on(si: Any, action: Action, vm_moid: str, on_event: Event) -> None:
    wait_task(_vm(si, vm_moid).PowerOnVM_Task(), f"power on VM {action.target}", on_event)


def ssh_answers(address: str, port: int, timeout: float = 2.0) -> bool:
    """True when something at address:port speaks SSH (its banner starts with SSH-)."""
    try:
        with socket.create_connection((address, port), timeout=timeout) as conn:
            conn.settimeout(timeout)
            return conn.recv(4).startswith(b"SSH-")
    except OSError:
        return False


def wait_up(
    si: Any,
    action: Action,
    vm_moid: str,
    on_event: Event,
    *,
    clock: Callable[[], float] = time.monotonic,
    interval: float = 1.0,
) -> dict[str, Any]:
    """Wait (bounded) for Tools' guest.ipAddress == address or SSH there; the VM's state.

    Returns {"address", "answered": "ssh" | "tools" | None, "seconds", "power_state",
    "guest_ip"}; answered None means the timeout passed (the caller reports it).
    """
    p = action.params
    vm = _vm(si, vm_moid)
    started = clock()
    deadline = started + p["timeout_s"]
    mode = p["wait_for"]
    state: dict[str, Any] = {"address": p["address"], "answered": None}
    while True:
        power = str(vm.runtime.powerState)
        guest_ip = vm.guest.ipAddress if vm.guest else None
        state |= {"power_state": power, "guest_ip": guest_ip or ""}
        if mode in ("any", "ssh") and ssh_answers(p["address"], p["port"]):
            state["answered"] = "ssh"
        elif mode in ("any", "tools") and guest_ip == p["address"]:
            state["answered"] = "tools"
        elapsed = clock() - started
        state["seconds"] = round(elapsed, 1)
        if state["answered"] or power != "poweredOn" or clock() > deadline:
            return state
        on_event(
            "progress",
            action,
            f"{action.target}: waiting for {p['address']}:{p['port']}"
            f" ({elapsed:.0f} s of {p['timeout_s']} s)",
        )
        time.sleep(interval)


def run_action(
    si: Any,
    action: Action,
    result: ApplyResult,
    on_event: Event,
    done: Callable[[Action, str], None],
    skip: Callable[[Action, str], None],
) -> None:
    """One lifecycle action; the moid of a VM cloned earlier in the run comes from `result`."""
    moid = action.params.get("vm_moid") or result.moids.get(action.target)
    if action.kind != "vm.clone" and moid is None:
        skip(action, f"VM {action.target} was not created in this run")
        return
    on_event("start", action, "")
    if action.kind == "vm.clone":
        result.moids[action.target] = clone(si, action, on_event)
        done(action, "")
    elif action.kind == "vm.customize":
        customize(si, action, moid, on_event)
        done(action, "")
    elif action.kind == "vm.power_on":
        power_on(si, action, moid, on_event)
        done(action, "")
    elif action.kind == "vm.wait":
        state = wait_up(si, action, moid, on_event) | {"waited": True}
        result.vms[action.target] = state
        if state["answered"]:
            done(action, f"answered on {state['answered']} after {state['seconds']:g} s")
        else:
            skip(action, f"no answer from {state['address']} in {state['seconds']:g} s")
