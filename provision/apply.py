"""Carry out a plan against vCenter: the only module that changes the rack.

Hosts first, one at a time: maintenance mode, ATS boot option, passthrough,
reboot, exit maintenance mode. Then VMs: create (and power on) or reconfigure. A host with
powered-on VMs is never put in maintenance or rebooted, and a powered-on VM is
never changed, unless `power_cycle` is set (then those VMs are powered off
first and on again afterwards). Every long operation is a task that is waited
on; a task fault stops the run with the fault's own message (`ApplyError`),
and `on_done` has been called for every action finished before it, so the
record keeps what was done and a re-run plans only what is left.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from provision.hostboot import REBOOT_TIMEOUT_S, RebootError, reboot_host, refresh_passthrough
from provision.planner import HOST_KINDS, LIFECYCLE_KINDS, Action
from rackcert.errors import RackcertError
from rackcert.vsphere_rules import ATS_OPTION, ESXCLI_ATS, TRANSIENT_FAULTS

Event = Callable[[str, Action | None, str], None]


class ApplyError(RackcertError):
    """A vCenter task failed or the connection dropped; what was done is recorded."""


@dataclass(frozen=True)
class Timeouts:
    """How long provision waits for what a real rack can take long for (seconds)."""

    reboot: float = REBOOT_TIMEOUT_S
    maintenance: float = 600.0


@dataclass
class ApplyResult:
    done: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    vms: dict[str, dict[str, Any]] = field(default_factory=dict)  # what each wait saw
    moids: dict[str, str] = field(default_factory=dict)  # VMs cloned in this run


def _quiet(_event: str, _action: Action | None, _detail: str) -> None:
    return None


def wait_task(task: Any, what: str, on_event: Event = _quiet, timeout: float = 3600) -> Any:
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


def _host(si: Any, moid: str) -> Any:
    from pyVmomi import vim

    return vim.HostSystem(moid, stub=si._stub)


def _vm(si: Any, moid: str) -> Any:
    from pyVmomi import vim

    return vim.VirtualMachine(moid, stub=si._stub)


def _power(si: Any, vms: list[dict[str, str]], on: bool, on_event: Event) -> None:
    for ref in vms:
        vm = _vm(si, ref["moid"])
        if on:
            wait_task(vm.PowerOnVM_Task(), f"power on VM {ref['name']}", on_event)
        else:
            wait_task(vm.PowerOffVM_Task(), f"power off VM {ref['name']}", on_event)


def _prepare_host(
    si: Any, name: str, actions: list[Action], on_event: Event, done: Any, timeouts: Timeouts
) -> None:
    """One host: maintenance mode, ATS, passthrough, reboot, exit maintenance mode."""
    from pyVmomi import vim

    host = _host(si, actions[0].params["host_moid"])
    operators = bool(host.runtime.inMaintenanceMode)
    if not operators:
        _enter_maintenance(host, name, on_event, timeouts)
    keep = "; host left in maintenance mode: it was in it before provision (the operator's)"
    for action in actions:
        on_event("start", action, "")
        if action.kind == "host.ats":
            _set_ats(host, name, action.params.get("option_type") or "bool")
        elif action.kind == "host.passthrough":
            now = bool(action.params.get("apply_now"))
            configs = [
                vim.host.PciPassthruConfig(id=pci, passthruEnabled=True, applyNow=now or None)
                for pci in action.params["enable"]
            ]
            host.configManager.pciPassthruSystem.UpdatePassthruConfig(config=configs)
            if now:
                try:
                    refresh_passthrough(host, name, list(action.params["enable"]))
                except RebootError as exc:
                    raise ApplyError(str(exc)) from None
        elif action.kind == "host.graphics":
            manager = host.configManager.graphicsManager
            current = manager.graphicsConfig
            config = vim.host.GraphicsConfig(
                hostDefaultGraphicsType="sharedDirect",
                sharedPassthruAssignmentPolicy=getattr(
                    current, "sharedPassthruAssignmentPolicy", "performance"
                ),
                deviceType=list(getattr(current, "deviceType", None) or []),
            )
            manager.UpdateGraphicsConfig(config=config)
        elif action.kind == "host.reboot":
            boot = _reboot(host, name, action, on_event, timeouts)
            done(action, f"booted {boot.isoformat()}" + (keep if operators else ""))
            continue
        done(action, keep[2:] if operators else "")
    if not operators:
        wait_task(host.ExitMaintenanceMode_Task(timeout=0), f"{name}: exit maintenance mode")


def _set_ats(host: Any, name: str, option_type: str) -> None:
    """VMkernel.Boot.atsSupport = on, typed as this host declares it (bool, or "TRUE")."""
    from pyVmomi import vim

    manager = host.configManager.advancedOption
    try:
        manager.QueryOptions(ATS_OPTION)
    except vim.fault.InvalidName:
        raise ApplyError(
            f"{name}: this ESXi build has no {ATS_OPTION}: run `{ESXCLI_ATS}` on the host,"
            " then reboot it"
        ) from None
    values = {"bool": True, "string": "TRUE", "int": 1, "long": 1}
    value = values.get(option_type, True)
    manager.UpdateOptions(changedValue=[vim.option.OptionValue(key=ATS_OPTION, value=value)])


def _enter_maintenance(host: Any, name: str, on_event: Event, timeouts: Timeouts) -> None:
    """Maintenance mode, bounded: vCenter waits for VMs that cannot move until `timeout`.

    The plan only gets here with no powered-on workload VM on the host (or with
    them powered off by --power-cycle); a VM powered on since the plan would
    make vCenter wait forever with timeout=0. evacuatePoweredOffVms is false:
    powered-off VMs holding the host's passthrough devices stay registered
    there (on a cluster without DRS, true would never succeed).
    """
    limit = int(timeouts.maintenance)
    task = host.EnterMaintenanceMode_Task(timeout=limit, evacuatePoweredOffVms=False)
    wait_task(task, f"{name}: enter maintenance mode", on_event, timeout=limit + 60)


def _reboot(host: Any, name: str, action: Action, on_event: Event, timeouts: Timeouts) -> Any:
    """Reboot and wait for a later boot time (provision/hostboot.py says why)."""
    try:
        return reboot_host(
            host,
            name,
            lambda task, what: wait_task(task, what, on_event),
            expect_active=list(action.params.get("passthrough") or []),
            timeout=timeouts.reboot,
            progress=lambda detail: on_event("progress", None, detail),
        )
    except RebootError as exc:
        raise ApplyError(str(exc)) from None


def _signed16(value: int) -> int:
    return value - 0x10000 if value > 0x7FFF else value


def _system_ids(host: Any) -> dict[str, str]:
    """PCI id -> systemId of the host's active passthrough devices (QueryConfigTarget)."""
    target = host.parent.environmentBrowser.QueryConfigTarget(host=host)
    return {p.pciDevice.id: p.systemId for p in (target.pciPassthrough or [])}


def _device_specs(host: Any, host_name: str, devices: list[dict[str, Any]]) -> list[Any]:
    from pyVmomi import vim

    vd = vim.vm.device
    system_ids = _system_ids(host) if any(d["backing"] == "fixed" for d in devices) else {}
    specs = []
    for i, dev in enumerate(devices):
        if dev["backing"] == "vgpu":
            backing = vd.VirtualPCIPassthrough.VmiopBackingInfo(vgpu=dev["vgpu"])
        else:
            pci = dev["id"]
            if pci not in system_ids:
                raise ApplyError(
                    f"{host_name}: PCI device {pci} is not active for passthrough (enable it"
                    " and reboot the host, e.g. re-run provision with --power-cycle)"
                )
            backing = vd.VirtualPCIPassthrough.DeviceBackingInfo(
                id=pci,
                deviceId=format(dev["device_id"], "x"),
                systemId=system_ids[pci],
                vendorId=_signed16(dev["vendor_id"]),
            )
        device = vd.VirtualPCIPassthrough(key=-100 - i, backing=backing)
        specs.append(vd.VirtualDeviceSpec(operation="add", device=device))
    return specs


def _extra(values: dict[str, str]) -> list[Any]:
    from pyVmomi import vim

    return [vim.option.OptionValue(key=k, value=v) for k, v in sorted(values.items())]


def _datacenter(entity: Any) -> Any:
    from pyVmomi import vim

    while entity is not None and not isinstance(entity, vim.Datacenter):
        entity = entity.parent
    if entity is None:
        raise ApplyError("cannot find the datacenter of the host")
    return entity


def _create_vm(si: Any, action: Action, on_event: Event, power_on: bool = True) -> None:
    from pyVmomi import vim

    want = action.params["desired"]
    host = _host(si, action.params["host_moid"])
    datastores = host.datastore
    if not datastores:
        raise ApplyError(f"{action.host}: no datastore to hold VM {want['name']}")
    config = vim.vm.ConfigSpec(
        name=want["name"],
        guestId=want["guest_id"],
        version=want["hardware_version"],
        numCPUs=want["num_cpus"],
        memoryMB=want["memory_mb"],
        firmware="efi",
        memoryReservationLockedToMax=True,
        files=vim.vm.FileInfo(vmPathName=f"[{datastores[0].name}]"),
        extraConfig=_extra(want["extra_config"]),
        deviceChange=_device_specs(host, action.host, want["devices"]),
    )
    compute = host.parent
    folder = _datacenter(compute).vmFolder
    task = folder.CreateVM_Task(config=config, pool=compute.resourcePool, host=host)
    vm = wait_task(task, f"create VM {want['name']}", on_event)
    if power_on:
        power_on_vm(vm, want["name"], on_event)


def power_on_vm(vm: Any, name: str, on_event: Event = _quiet) -> None:
    """Power a VM on; ESXi checks its passthrough backings and reservation only now.

    A refusal (device not active, wrong systemId, device held by another
    powered-on VM, memory not fully reserved) fails the action with ESXi's own
    message, so a VM that could never start is not reported as provisioned.
    """
    wait_task(vm.PowerOnVM_Task(), f"power on VM {name}", on_event)


def _reconfigure_vm(si: Any, action: Action, on_event: Event) -> None:
    from pyVmomi import vim

    want = action.params["desired"]
    vm = _vm(si, action.params["vm_moid"])
    host = _host(si, action.params["host_moid"])
    changes = _device_specs(host, action.host, action.params["add_devices"])
    if action.params.get("disk") or action.params.get("nic"):
        from provision.lifecycle import hardware_specs

        changes += hardware_specs(vm, host, action)
    remove = set(action.params["remove_device_keys"])
    if remove:
        for dev in vm.config.hardware.device:
            if dev.key in remove:
                changes.append(vim.vm.device.VirtualDeviceSpec(operation="remove", device=dev))
    # No firmware here: an existing VM's firmware is never switched (planner: vm.firmware).
    config = vim.vm.ConfigSpec(
        numCPUs=want["num_cpus"],
        memoryMB=want["memory_mb"],
        memoryReservationLockedToMax=True,
        extraConfig=_extra(action.params["extra_config"]),
        deviceChange=changes,
    )
    wait_task(vm.ReconfigVM_Task(spec=config), f"reconfigure VM {want['name']}", on_event)


def apply(
    si: Any,
    actions: list[Action],
    *,
    power_cycle: bool = False,
    on_event: Event = _quiet,
    on_done: Callable[[ApplyResult], None] | None = None,
    timeouts: Timeouts | None = None,
    power_on: bool = True,
) -> ApplyResult:
    """Apply `actions` in order; `on_done(result)` runs after each finished or skipped action.

    VMs it creates are powered on unless `power_on` is False (ESXi checks their
    passthrough devices only then); VMs it powered off to change are powered on again.
    """
    result = ApplyResult()
    timeouts = timeouts or Timeouts()
    current: list[Action] = []
    outer = on_event

    def on_event(event: str, action: Action | None, detail: str) -> None:  # noqa: F811
        if event == "start" and action is not None:
            current[:] = [action]
        outer(event, action, detail)

    def done(action: Action, note: str) -> None:
        result.done.append(action.to_dict() | {"result": note or "done"})
        on_event("done", action, note)
        if on_done:
            on_done(result)

    def skip(action: Action, why: str) -> None:
        result.skipped.append(action.to_dict() | {"skipped": why})
        on_event("skipped", action, why)
        if on_done:
            on_done(result)

    skipped_hosts: set[str] = set()
    restart: list[dict[str, str]] = []
    try:
        hosts: dict[str, list[Action]] = {}
        for action in actions:
            if action.kind in HOST_KINDS:
                hosts.setdefault(action.host, []).append(action)
        for name, host_actions in hosts.items():
            for action in [a for a in host_actions if a.blocked]:
                skip(action, action.blocked or "")
            host_actions = [a for a in host_actions if not a.blocked]
            if not host_actions:
                continue
            running = host_actions[0].params.get("powered_on_vms") or []
            if running and not power_cycle:
                skipped_hosts.add(name)
                names = ", ".join(v["name"] for v in running)
                for action in host_actions:
                    skip(action, f"host has powered-on VM(s) {names}; re-run with --power-cycle")
                continue
            if running:
                _power(si, running, on=False, on_event=on_event)
                restart += running
            _prepare_host(si, name, host_actions, on_event, done, timeouts)
        for action in actions:
            if action.kind in HOST_KINDS:
                continue
            _apply_vm(
                si,
                action,
                power_cycle,
                skipped_hosts,
                on_event,
                done,
                skip,
                restart,
                result,
                power_on,
            )
        _power(si, restart, on=True, on_event=on_event)
        _raise_unanswered(result)
    except ApplyError:
        raise
    except TRANSIENT_FAULTS as exc:
        raise ApplyError(
            f"the connection to vCenter dropped ({type(exc).__name__}); what was done is"
            " recorded: re-run provision to finish"
        ) from None
    except Exception as exc:  # pyVmomi raises vmodl.MethodFault subclasses for API faults
        msg = getattr(exc, "msg", None)
        if msg is None:
            raise
        where = f"{current[0].target}: {current[0].kind}" if current else "provision"
        raise ApplyError(f"{where} refused by vCenter: {msg}") from None
    return result


def _apply_vm(
    si: Any,
    action: Action,
    power_cycle: bool,
    skipped_hosts: set[str],
    on_event: Event,
    done: Callable[[Action, str], None],
    skip: Callable[[Action, str], None],
    restart: list[dict[str, str]],
    result: ApplyResult | None = None,
    power_on: bool = True,
) -> None:
    if action.blocked:
        skip(action, action.blocked)
        return
    if action.kind in LIFECYCLE_KINDS:
        from provision.lifecycle import run_action

        if action.host in skipped_hosts:
            skip(action, f"host {action.host} was not prepared (powered-on VMs)")
            return
        if not power_on and action.kind in ("vm.power_on", "vm.wait"):
            skip(action, "left powered off (--no-power-on)")
            return
        run_action(si, action, result or ApplyResult(), on_event, done, skip)
        return
    if action.host in skipped_hosts:
        skip(action, f"host {action.host} was not prepared (powered-on VMs)")
        return
    if action.needs_power_cycle and not power_cycle:
        skip(action, "VM is powered on; re-run with --power-cycle to change it")
        return
    on_event("start", action, "")
    if action.kind == "vm.create":
        _create_vm(si, action, on_event, power_on)
    elif action.kind == "vm.reconfigure":
        ref = {"name": action.target, "moid": action.params["vm_moid"]}
        if action.needs_power_cycle and ref not in restart:
            _power(si, [ref], on=False, on_event=on_event)
            restart.append(ref)
        _reconfigure_vm(si, action, on_event)
    done(action, "")


def _raise_unanswered(result: ApplyResult) -> None:
    """After every wait: VMs that did not answer in time fail the run (the rest are done)."""
    late = [(n, s) for n, s in result.vms.items() if s.get("waited") and not s.get("answered")]
    if late:
        what = ", ".join(
            f"{n} ({s['address']}, {s.get('power_state', '?')}, {s.get('seconds', 0):g} s)"
            for n, s in late
        )
        raise ApplyError(
            f"VM(s) did not answer after power-on: {what}; check the VM's console and its"
            " cloud-init network (network.management), then re-run provision"
        )
