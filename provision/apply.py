"""Carry out a plan against vCenter: the only module that changes the rack.

Hosts and VMs in bounded parallel (provision/pace.py says how much and why). Each host is
one lane: its maintenance window (ATS boot option, passthrough, reboot, exit), then its
VMs' chains (clone, customize, power on, wait; or reconfigure), each VM its own chain,
with at most `parallelism` vCenter tasks in flight over the whole rack. A host with
powered-on VMs is never put in maintenance or rebooted, and a powered-on VM is never
changed, unless `power_cycle` is set (then those VMs are powered off first and on again
afterwards, and such hosts go in waves of what the cluster can lose). Every long operation
is a task that is waited on. A fault stops only its own lane: the rest of that host's
chain and its VMs (or the rest of that VM's chain) are recorded skipped, the other lanes
finish, and then `ApplyError` names every failed host and VM. `on_done` runs after every
finished or skipped action, so the record keeps what was done and a re-run plans only
what is left.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from provision import lifecycle, maintenance_mark
from provision.guestwatch import watching_guests
from provision.host_steps import HOST_STEPS, Timeouts, prepare_host
from provision.maintenance_mark import field_key
from provision.pace import RANK, Pace, Slots, cluster_tolerance, host_waves
from provision.planner import HOST_KINDS, LIFECYCLE_KINDS, Action
from provision.taskwatch import watching
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
    set_poll_cap,
    vm_ref,
    wait_task,
)
from rackcert.core.runs import utc_now
from rackcert.core.stage_records import DoneAction, ProvisionData, SkippedAction
from rackcert.core.vsphere_rules import TRANSIENT_FAULTS

__all__ = ["ApplyError", "Pace", "Timeouts", "apply", "wait_task"]


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

    ref = {"name": action.target, "moid": action.params["vm_moid"], "host": action.host}
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
    step.moids[action.target], note = lifecycle.clone(step.si, action, step.on_event)
    return note


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
    pace: Pace | None = None,
    run_id: str = "provision",
    record_lock: threading.RLock | None = None,
) -> ProvisionData:
    """Apply `actions` into `data` (done, skipped, each host's and VM's state, waits).

    `on_done(data)` runs after every change to `data` (an action finished or skipped, a
    host's or VM's state), under `record_lock`, which guards every change: the caller
    records the stage as it goes (provision/record_flush.py) and a fault loses nothing.
    VMs it creates are powered on unless `power_on` is False (ESXi checks their passthrough
    devices only then); VMs it powered off to change are powered on again. `pace` bounds
    what runs at once.
    """
    data = data if data is not None else ProvisionData()
    run = _Run(si, data, on_event, on_done, power_cycle, timeouts or Timeouts(), pace or Pace())
    run.lock = record_lock if record_lock is not None else run.lock
    run.step.power_on = power_on
    run.run_id = run_id
    set_poll_cap(max(0.001, 2 * run.pace.poll_s))
    lifecycle.WAIT_POLL_S["interval"] = run.pace.poll_s
    waits = any(a.kind == "vm.wait" for a in actions)
    with watching(si, interval=2 * run.pace.poll_s), watching_guests(si, waits):
        run.go(actions)
    return data


@dataclass
class _Lane:
    """One host: its host actions (maybe none) and its VMs' chains, in plan order."""

    host: str
    host_actions: list[Action] = field(default_factory=list)
    vms: dict[str, list[Action]] = field(default_factory=dict)
    running: list[dict[str, str]] = field(default_factory=list)  # powered-on workload VMs


class _Run:
    """One apply: the lanes, the task slots, the thread-safe record and progress."""

    def __init__(
        self,
        si: Any,
        data: ProvisionData,
        on_event: Event,
        on_done: Callable[[ProvisionData], None] | None,
        power_cycle: bool,
        timeouts: Timeouts,
        pace: Pace,
    ) -> None:
        self.si = si
        self.data = data
        self.outer = on_event
        self.on_done = on_done
        self.power_cycle = power_cycle
        self.timeouts = timeouts
        self.pace = pace
        self.run_id = "provision"
        self.lock = threading.RLock()
        self.slots = Slots(pace.parallelism)
        self.started: dict[int, str] = {}
        self.current: dict[int, Action] = {}  # thread -> the action it carries out
        self.failed: dict[str, str] = {}  # host or VM -> why its lane stopped
        self.skipped_hosts: set[str] = set()
        self.step = VmStep(si=si, on_event=self.event, data=data, power_on=True)
        self.mark_key: int | None = None

    # -- the record, from any thread ------------------------------------------------------
    def event(self, kind: str, action: Action | None, detail: str) -> None:
        """apply's progress hook, from any thread; a task's progress without an action is
        this thread's current action's (each lane's chain runs in its own thread)."""
        ident = threading.get_ident()
        with self.lock:
            if kind == "start" and action is not None:
                self.started[id(action)] = utc_now()
                self.current[ident] = action
            elif action is None:
                action = self.current.get(ident)
            self.outer(kind, action, detail)

    def done(self, action: Action, note: str) -> None:
        with self.lock:
            started = self.started.get(id(action), utc_now())
            self.data.done.append(
                DoneAction(
                    **action.model_dump(),
                    result=note or "done",
                    started_at=started,
                    ended_at=utc_now(),
                )
            )
            self.outer("done", action, note)
            if self.on_done:
                self.on_done(self.data)

    def skip(self, action: Action, why: str) -> None:
        with self.lock:
            self.data.skipped.append(
                SkippedAction(**action.model_dump(), skipped=why, ended_at=utc_now())
            )
            self.outer("skipped", action, why)
            if self.on_done:
                self.on_done(self.data)

    def state(self, kind: str, name: str, **values: Any) -> None:
        with self.lock:
            book = self.data.hosts if kind == "host" else self.data.vms
            book.setdefault(name, {}).update(values)
            if self.on_done:
                self.on_done(self.data)

    # -- lanes ----------------------------------------------------------------------------
    def lanes(self, actions: list[Action]) -> list[_Lane]:
        lanes: dict[str, _Lane] = {}
        for action in actions:
            lane = lanes.setdefault(action.host, _Lane(action.host))
            if action.kind in HOST_KINDS:
                if action.blocked:
                    self.skip(action, action.blocked)
                else:
                    lane.host_actions.append(action)
            else:
                lane.vms.setdefault(action.target, []).append(action)
        for lane in lanes.values():
            if lane.host_actions:
                lane.running = list(lane.host_actions[0].params.get("powered_on_vms") or [])
                self.state("host", lane.host, state="pending")
            for vm in lane.vms:
                self.state("vm", vm, state="pending")
        return list(lanes.values())

    def go(self, actions: list[Action]) -> None:
        lanes = self.lanes(actions)
        busy = [lane for lane in lanes if lane.host_actions and lane.running and self.power_cycle]
        limit = self.pace.max_hosts_in_maintenance
        if busy and limit is None:
            limit = cluster_tolerance(self.si, busy[0].host_actions[0].params["host_moid"])
        waves = host_waves([(ln.host, ln in busy) for ln in lanes], limit or 1)
        for number, wave in enumerate(waves):
            for host in wave:
                self.state("host", host, wave=number)
        if any(lane.host_actions for lane in lanes):
            self.mark_key = field_key(self.si, create=True)
        gate = threading.Semaphore(max(1, limit or 1))
        if self.pace.sequential:
            for lane in lanes:
                self.lane(lane, None)
            self.finish()
            return
        with ThreadPoolExecutor(max_workers=max(1, len(lanes))) as pool:
            futures = [
                pool.submit(self.lane, lane, gate if lane in busy else None) for lane in lanes
            ]
            for future in futures:
                future.result()
        self.finish()

    def lane(self, lane: _Lane, gate: threading.Semaphore | None) -> None:
        if gate is not None:
            gate.acquire()
        try:
            if not self.prepare(lane):
                for chain in lane.vms.values():
                    self.chain(chain, lane)  # records each action skipped, and why
                return
            with ThreadPoolExecutor(max_workers=max(1, len(lane.vms))) as pool:
                for future in [pool.submit(self.chain, c, lane) for c in lane.vms.values()]:
                    future.result()
            restart = [r for r in self.step.restart if r.get("host") == lane.host]
            if restart:
                try:
                    with self.slots.take(RANK["power"]):
                        _power(self.si, restart, on=True, on_event=self.event)
                except Exception as exc:
                    if not _is_fault(exc):
                        raise
                    self.fail(lane.host, f"{lane.host}: power on again: {_message(exc)}")
        finally:
            if gate is not None:
                gate.release()

    def prepare(self, lane: _Lane) -> bool:
        """The host's maintenance window; False when its VMs must not go ahead."""
        if not lane.host_actions:
            return lane.host not in self.failed
        name = lane.host
        if lane.running and not self.power_cycle:
            self.skipped_hosts.add(name)
            names = ", ".join(v["name"] for v in lane.running)
            for action in lane.host_actions:
                self.skip(action, f"host has powered-on VM(s) {names}; re-run with --power-cycle")
            self.state("host", name, state="skipped", why=f"powered-on VM(s) {names}")
            return True  # its VM actions are skipped one by one (_why_not says why)
        self.state("host", name, state="preparing", started_at=utc_now())
        try:
            if lane.running:
                with self.slots.take(RANK["power"]):
                    _power(self.si, lane.running, on=False, on_event=self.event)
                with self.lock:
                    self.step.restart += [r | {"host": name} for r in lane.running]
            prepare_host(
                self.si,
                name,
                lane.host_actions,
                self.event,
                self.done,
                self.timeouts,
                mark=self.mark,
            )
        except Exception as exc:
            if not _is_fault(exc):
                raise
            why = _message(exc)
            self.fail(name, why)
            for action in lane.host_actions:
                if not any(
                    d.kind == action.kind and d.target == action.target for d in self.data.done
                ):
                    self.skip(action, f"host {name} failed: {why}")
            self.state("host", name, state="failed", error=why, ended_at=utc_now())
            return False
        self.state("host", name, state="prepared", ended_at=utc_now())
        return True

    def mark(self, host: Any, entered: bool) -> None:
        """Mark (or clear) the maintenance window rackcert opened, in vCenter."""
        if self.mark_key is None:
            return
        if entered:
            maintenance_mark.mark(self.si, host, self.mark_key, self.run_id)
        else:
            maintenance_mark.clear(self.si, host, self.mark_key)

    def chain(self, actions: list[Action], lane: _Lane) -> None:
        """One VM's actions in order; a fault stops the rest of this VM only."""
        stopped = ""
        began = False
        for action in actions:
            why = stopped or self.why_not(action, lane)
            if why:
                self.skip(action, why)
                continue
            began = True
            self.event("start", action, "")
            self.state("vm", action.target, state=action.kind)
            try:
                if action.kind == "vm.wait":
                    outcome = VM_STEPS[action.kind](self.step, action)
                else:
                    with self.slots.take(RANK[action.kind]):
                        outcome = VM_STEPS[action.kind](self.step, action)
            except Exception as exc:
                if not _is_fault(exc):
                    raise
                message = _message(exc)
                where = f"{action.target}: {action.kind}"
                stopped = f"VM {action.target} stopped: {where} failed"
                self.fail(action.target, f"{where}: {message}")
                self.state("vm", action.target, state="failed", error=message)
                self.skip(action, message)
                continue
            if isinstance(outcome, Left):
                self.skip(action, outcome.why)
            else:
                self.done(action, outcome)
        name = actions[0].target if actions else ""
        if name and not began:
            self.state("vm", name, state="skipped")
        elif name and not stopped and name not in self.failed:
            seen = self.data.vms.get(name, {})
            late = seen.get("waited") and not seen.get("answered")
            self.state("vm", name, state="no answer" if late else "done")

    def why_not(self, action: Action, lane: _Lane) -> str:
        if lane.host in self.failed and action.host == lane.host:
            return f"host {lane.host} failed: {self.failed[lane.host]}"
        return _why_not(self.step, action, self.power_cycle, self.skipped_hosts)

    def fail(self, name: str, why: str) -> None:
        with self.lock:
            self.failed[name] = why

    def finish(self) -> None:
        """After every lane: name every failed host and VM, and every VM that did not answer."""
        parts = []
        hosts = [h for h in self.failed if h in self.data.hosts]
        vms = [v for v in self.failed if v not in self.data.hosts]
        if hosts:
            parts.append(
                "failed host(s): " + "; ".join(f"{h} ({self.failed[h]})" for h in sorted(hosts))
            )
        if vms:
            parts.append("failed VM(s): " + "; ".join(f"{self.failed[v]}" for v in sorted(vms)))
        late = _unanswered(self.data)
        if late:
            parts.append(late)
        if parts:
            done_hosts = sorted(
                h for h, s in self.data.hosts.items() if s.get("state") == "prepared"
            )
            rest = f"; the other lanes finished ({len(done_hosts)} host(s) prepared)"
            raise ApplyError(
                "; ".join(parts) + rest + "; what was done is recorded: re-run provision to"
                " finish the rest"
            )


def _is_fault(exc: BaseException) -> bool:
    """A fault that stops one lane: a task's, vCenter's (pyVmomi's MethodFault has .msg), or
    a dropped connection. Anything else is a bug, and surfaces."""
    return isinstance(exc, (ApplyError, *TRANSIENT_FAULTS)) or hasattr(exc, "msg")


def _message(exc: BaseException) -> str:
    if isinstance(exc, ApplyError):
        return str(exc)
    if isinstance(exc, TRANSIENT_FAULTS):
        return f"the connection to vCenter dropped ({type(exc).__name__})"
    return getattr(exc, "msg", None) or type(exc).__name__


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


def _unanswered(data: ProvisionData) -> str:
    """VMs whose wait ended without an answer, named with what was seen ("" when none)."""
    late = [(n, s) for n, s in data.vms.items() if s.get("waited") and not s.get("answered")]
    if not late:
        return ""
    what = ", ".join(
        f"{n} ({s['address']}, {s.get('power_state', '?')}, {s.get('seconds', 0):g} s)"
        for n, s in sorted(late)
    )
    return (
        f"VM(s) did not answer after power-on: {what}; check the VM's console and its"
        " cloud-init network (network.management), then re-run provision"
    )
