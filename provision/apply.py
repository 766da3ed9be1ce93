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

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from provision import lifecycle
from provision.host_steps import HOST_STEPS, Timeouts, prepare_host
from provision.planner import HOST_KINDS, LIFECYCLE_KINDS, Action
from provision.vsphere_ops import (
    ApplyError,
    Event,
    datacenter_of,
    extra_config,
    group_specs,
    hardware_specs,
    host_ref,
    passthrough_specs,
    power_vm,
    quiet,
    vm_ref,
    wait_task,
)
from rackcert.stage_records import DoneAction, ProvisionData, SkippedAction
from rackcert.vsphere_rules import TRANSIENT_FAULTS

__all__ = ["ApplyError", "Timeouts", "apply", "wait_task"]


@dataclass
class Left:
    """A step that ended without doing its work, and why (the action is recorded skipped)."""

    why: str


@dataclass
class VmStep:
    """What a VM step is given: the session, the run's record so far, the moids it made."""

    si: Any
    on_event: Event
    data: ProvisionData
    power_on: bool
    moids: dict[str, str] = field(default_factory=dict)  # VMs cloned in this run
    restart: list[dict[str, str]] = field(default_factory=list)  # powered off to change

    def moid(self, action: Action) -> str | None:
        return action.params.get("vm_moid") or self.moids.get(action.target)


def _power(si: Any, vms: list[dict[str, str]], on: bool, on_event: Event) -> None:
    for ref in vms:
        power_vm(vm_ref(si, ref["moid"]), ref["name"], on, on_event)


def _create_vm(step: VmStep, action: Action) -> str | Left:
    from pyVmomi import vim

    want = action.params["desired"]
    host = host_ref(step.si, action.params["host_moid"])
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
        extraConfig=extra_config(want["extra_config"]),
        deviceChange=passthrough_specs(host, action.host, want["devices"]),
    )
    compute = host.parent
    folder = datacenter_of(compute).vmFolder
    task = folder.CreateVM_Task(config=config, pool=compute.resourcePool, host=host)
    vm = wait_task(task, f"create VM {want['name']}", step.on_event)
    if step.power_on:
        power_vm(vm, want["name"], True, step.on_event)
    return ""


def _reconfigure_vm(step: VmStep, action: Action) -> str | Left:
    from pyVmomi import vim

    ref = {"name": action.target, "moid": action.params["vm_moid"]}
    if action.needs_power_cycle and ref not in step.restart:
        _power(step.si, [ref], on=False, on_event=step.on_event)
        step.restart.append(ref)
    want = action.params["desired"]
    vm = vm_ref(step.si, action.params["vm_moid"])
    host = host_ref(step.si, action.params["host_moid"])
    changes = passthrough_specs(host, action.host, action.params["add_devices"])
    if action.params.get("disk") or action.params.get("nic"):
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
        extraConfig=extra_config(action.params["extra_config"]),
        deviceChange=changes,
    )
    if action.params.get("add_group"):  # vSphere 8: the VM's device group, whole, in this request
        config.deviceGroups, members = group_specs(host, action.host, action.params["device_group"])
        config.deviceChange = [*changes, *members]
    wait_task(vm.ReconfigVM_Task(spec=config), f"reconfigure VM {want['name']}", step.on_event)
    return ""


def _clone(step: VmStep, action: Action) -> str | Left:
    step.moids[action.target] = lifecycle.clone(step.si, action, step.on_event)
    return ""


def _customize(step: VmStep, action: Action) -> str | Left:
    lifecycle.customize(step.si, action, _made(step, action), step.on_event)
    return ""


def _power_on(step: VmStep, action: Action) -> str | Left:
    power_vm(vm_ref(step.si, _made(step, action)), action.target, True, step.on_event)
    return ""


def _wait(step: VmStep, action: Action) -> str | Left:
    state = lifecycle.wait_up(step.si, action, _made(step, action), step.on_event)
    step.data.vms[action.target] = state | {"waited": True}
    if state["answered"]:
        return f"answered on {state['answered']} after {state['seconds']:g} s"
    return Left(f"no answer from {state['address']} in {state['seconds']:g} s")


def _made(step: VmStep, action: Action) -> str:
    moid = step.moid(action)
    assert moid is not None  # apply skips a lifecycle step whose VM was not made
    return moid


# Every VM action kind the planner emits, and the step that carries it out.
VM_STEPS: dict[str, Callable[[VmStep, Action], str | Left]] = {
    "vm.create": _create_vm,
    "vm.reconfigure": _reconfigure_vm,
    "vm.clone": _clone,
    "vm.customize": _customize,
    "vm.power_on": _power_on,
    "vm.wait": _wait,
}


# The one table of what provision can do: each action kind the planner emits, and its step
# (host steps run inside the host's maintenance window; REPORT_ONLY_KINDS are never applied).
STEPS: dict[str, Callable[..., Any]] = {**HOST_STEPS, **VM_STEPS}


def apply(
    si: Any,
    actions: list[Action],
    *,
    data: ProvisionData | None = None,
    power_cycle: bool = False,
    on_event: Event = quiet,
    on_done: Callable[[ProvisionData], None] | None = None,
    timeouts: Timeouts | None = None,
    power_on: bool = True,
) -> ProvisionData:
    """Apply `actions` in order into `data` (done, skipped, what each wait saw).

    `on_done(data)` runs after each finished or skipped action, so the caller can record
    the stage after every step and a fault loses nothing. VMs it creates are powered on
    unless `power_on` is False (ESXi checks their passthrough devices only then); VMs it
    powered off to change are powered on again.
    """
    data = data if data is not None else ProvisionData()
    timeouts = timeouts or Timeouts()
    current: list[Action] = []
    outer = on_event

    def on_event(event: str, action: Action | None, detail: str) -> None:  # noqa: F811
        if event == "start" and action is not None:
            current[:] = [action]
        outer(event, action, detail)

    def done(action: Action, note: str) -> None:
        data.done.append(DoneAction(**action.model_dump(), result=note or "done"))
        on_event("done", action, note)
        if on_done:
            on_done(data)

    def skip(action: Action, why: str) -> None:
        data.skipped.append(SkippedAction(**action.model_dump(), skipped=why))
        on_event("skipped", action, why)
        if on_done:
            on_done(data)

    step = VmStep(si=si, on_event=on_event, data=data, power_on=power_on)
    skipped_hosts: set[str] = set()
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
                step.restart += running
            prepare_host(si, name, host_actions, on_event, done, timeouts)
        for action in actions:
            if action.kind in HOST_KINDS:
                continue
            why = _why_not(step, action, power_cycle, skipped_hosts)
            if why:
                skip(action, why)
                continue
            on_event("start", action, "")
            outcome = VM_STEPS[action.kind](step, action)
            if isinstance(outcome, Left):
                skip(action, outcome.why)
            else:
                done(action, outcome)
        _power(si, step.restart, on=True, on_event=on_event)
        _raise_unanswered(data)
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
    return data


def _why_not(step: VmStep, action: Action, power_cycle: bool, skipped_hosts: set[str]) -> str:
    """Why a VM action is left undone in this run ("" when it goes ahead)."""
    if action.blocked:
        return action.blocked
    if action.host in skipped_hosts:
        return f"host {action.host} was not prepared (powered-on VMs)"
    if action.kind in LIFECYCLE_KINDS:
        if not step.power_on and action.kind in ("vm.power_on", "vm.wait"):
            return "left powered off (--no-power-on)"
        if action.kind != "vm.clone" and step.moid(action) is None:
            return f"VM {action.target} was not created in this run"
        return ""
    if action.needs_power_cycle and not power_cycle:
        return "VM is powered on; re-run with --power-cycle to change it"
    return ""


def _raise_unanswered(data: ProvisionData) -> None:
    """After every wait: VMs that did not answer in time fail the run (the rest are done)."""
    late = [(n, s) for n, s in data.vms.items() if s.get("waited") and not s.get("answered")]
    if late:
        what = ", ".join(
            f"{n} ({s['address']}, {s.get('power_state', '?')}, {s.get('seconds', 0):g} s)"
            for n, s in late
        )
        raise ApplyError(
            f"VM(s) did not answer after power-on: {what}; check the VM's console and its"
            " cloud-init network (network.management), then re-run provision"
        )
