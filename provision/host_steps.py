"""What provision does to one ESXi host: maintenance mode, settings, VIBs, reboot.

Why per host, in one window: the ATS boot option and passthrough changes take effect at a
reboot, and a host is rebooted only in maintenance mode with no powered-on workload VM
(the planner and apply.py make sure of that). `HOST_STEPS` maps each host action kind to
its step; `prepare_host` carries out a host's actions inside one maintenance window.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from provision.hostboot import REBOOT_TIMEOUT_S, RebootError, reboot_host, refresh_passthrough
from provision.vsphere_ops import ApplyError, Event, host_ref, wait_task
from rackcert.core.stage_records import ActionRecord
from rackcert.core.vsphere_rules import ATS_OPTION, ESXCLI_ATS


@dataclass(frozen=True)
class Timeouts:
    """How long provision waits for what a real rack can take long for (seconds)."""

    reboot: float = REBOOT_TIMEOUT_S
    maintenance: float = 600.0


@dataclass(frozen=True)
class HostStep:
    """What a host step is given: the host, its name, the progress hook and the timeouts."""

    host: Any
    name: str
    on_event: Event
    timeouts: Timeouts


def set_ats(step: HostStep, action: ActionRecord) -> str:
    """VMkernel.Boot.atsSupport = on, typed as this host declares it (bool, or "TRUE")."""
    from pyVmomi import vim

    manager = step.host.configManager.advancedOption
    try:
        manager.QueryOptions(ATS_OPTION)
    except vim.fault.InvalidName:
        raise ApplyError(
            f"{step.name}: this ESXi build has no {ATS_OPTION}: run `{ESXCLI_ATS}` on the host,"
            " then reboot it"
        ) from None
    values = {"bool": True, "string": "TRUE", "int": 1, "long": 1}
    value = values.get(action.params.get("option_type") or "bool", True)
    manager.UpdateOptions(changedValue=[vim.option.OptionValue(key=ATS_OPTION, value=value)])
    return ""


def enable_passthrough(step: HostStep, action: ActionRecord) -> str:
    """HostPciPassthruSystem.UpdatePassthruConfig; applyNow (API 7.0+) where the plan says so."""
    from pyVmomi import vim

    now = bool(action.params.get("apply_now"))
    configs = [
        vim.host.PciPassthruConfig(id=pci, passthruEnabled=True, applyNow=now or None)
        for pci in action.params["enable"]
    ]
    step.host.configManager.pciPassthruSystem.UpdatePassthruConfig(config=configs)
    if now:
        try:
            refresh_passthrough(step.host, step.name, list(action.params["enable"]))
        except RebootError as exc:
            raise ApplyError(str(exc)) from None
    return ""


def shared_direct_graphics(step: HostStep, _action: ActionRecord) -> str:
    """vGPU needs the host's default graphics type Shared Direct (HostGraphicsManager)."""
    from pyVmomi import vim

    manager = step.host.configManager.graphicsManager
    current = manager.graphicsConfig
    config = vim.host.GraphicsConfig(
        hostDefaultGraphicsType="sharedDirect",
        sharedPassthruAssignmentPolicy=getattr(
            current, "sharedPassthruAssignmentPolicy", "performance"
        ),
        deviceType=list(getattr(current, "deviceType", None) or []),
    )
    manager.UpdateGraphicsConfig(config=config)
    return ""


def install_vgpu_manager(step: HostStep, action: ActionRecord) -> str:
    """`esxcli software vib install -d <depot>`: the NVIDIA vGPU manager, in maintenance mode.

    NVIDIA's vGPU guide for vSphere installs the manager VIB this way, with the host in
    maintenance mode, then reboots it (the host.reboot the plan puts after this step).
    """
    from provision.esxcli import EsxcliError, vib_install

    depot = action.params["depot"]
    try:
        result = vib_install(step.host, depot)
    except EsxcliError as exc:
        raise ApplyError(f"{step.name}: esxcli software vib install -d {depot}: {exc}") from None
    done = ", ".join(result.installed) or "nothing new (" + ", ".join(result.skipped) + ")"
    return f"installed {done}" + ("; reboot required" if result.reboot_required else "")


def reboot(step: HostStep, action: ActionRecord) -> str:
    """Reboot and wait for a later boot time (provision/hostboot.py says why)."""
    try:
        boot = reboot_host(
            step.host,
            step.name,
            lambda task, what: wait_task(task, what, step.on_event),
            expect_active=list(action.params.get("passthrough") or []),
            timeout=step.timeouts.reboot,
            progress=lambda detail: step.on_event("progress", None, detail),
        )
    except RebootError as exc:
        raise ApplyError(str(exc)) from None
    return f"booted {boot.isoformat()}"


HOST_STEPS: dict[str, Callable[[HostStep, ActionRecord], str]] = {
    "host.ats": set_ats,
    "host.passthrough": enable_passthrough,
    "host.graphics": shared_direct_graphics,
    "host.vgpu_manager": install_vgpu_manager,
    "host.reboot": reboot,
}


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


def _no_mark(_host: Any, _entered: bool) -> None:
    return None


def prepare_host(
    si: Any,
    name: str,
    actions: list[ActionRecord],
    on_event: Event,
    done: Callable[[ActionRecord, str], None],
    timeouts: Timeouts,
    *,
    mark: Callable[[Any, bool], None] = _no_mark,
) -> None:
    """One host's actions inside one maintenance window (kept if the operator had set it).

    `mark(host, entered)` notes in vCenter that rackcert opened the window (and closes the
    note after the exit), so a re-run can tell rackcert's window from an operator's.
    Its tasks take none of apply's VM task slots (provision/pace.py says why).
    """
    host = host_ref(si, actions[0].params["host_moid"])
    operators = bool(host.runtime.inMaintenanceMode)
    if not operators:
        mark(host, True)  # before the task: a kill in between leaves a mark, not a mystery
        try:
            _enter_maintenance(host, name, on_event, timeouts)
        except ApplyError:
            if not host.runtime.inMaintenanceMode:
                mark(host, False)  # it never entered: nothing of rackcert's to close
            raise
    keep = "host left in maintenance mode: it was in it before provision (the operator's)"
    step = HostStep(host=host, name=name, on_event=on_event, timeouts=timeouts)
    try:
        for action in actions:
            on_event("start", action, "")
            note = HOST_STEPS[action.kind](step, action)
            if operators:
                note = f"{note}; {keep}" if note else keep
            done(action, note)
    except ApplyError as exc:
        if not operators:
            left = _leave_maintenance_after_fault(host, name)
            if left.endswith("out of maintenance mode again"):
                mark(host, False)
            raise ApplyError(f"{exc}{left}", exc.fault) from None
        raise
    if not operators:
        wait_task(host.ExitMaintenanceMode_Task(timeout=0), f"{name}: exit maintenance mode")
        mark(host, False)


def _leave_maintenance_after_fault(host: Any, name: str) -> str:
    """A step failed inside the maintenance window rackcert opened: close it again, best
    effort, so a re-run does not mistake rackcert's window for the operator's (and vSphere
    then refuses to power VMs on there). Returns what to add to the error line."""
    from pyVmomi import vmodl

    from rackcert.core.vsphere_rules import TRANSIENT_FAULTS

    failed: tuple[type[BaseException], ...] = (ApplyError, vmodl.MethodFault, *TRANSIENT_FAULTS)
    try:
        wait_task(
            host.ExitMaintenanceMode_Task(timeout=0), f"{name}: exit maintenance mode", timeout=300
        )
    except failed:
        return f"; {name} is still in the maintenance mode rackcert put it in: exit it by hand"
    return f"; {name} taken out of maintenance mode again"
