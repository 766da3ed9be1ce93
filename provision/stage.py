"""The plan and provision stages below the CLI: discover, plan, apply, record.

`run_plan(loaded, run)` records plan.json; `run(loaded, run, ...)` records provision.json
(observed_before, actions, done, skipped, observed_after, written after every action so
a fault loses nothing) and returns the typed record. Both raise a RackcertError when the
stage could not do its work, after recording what it saw; `rackcert plan`, `rackcert
provision` and `rackcert bootstrap` are thin callers of these.

    >>> from provision import run_plan
    >>> record = run_plan(load_spec("inventories/lab.yaml"), run)
    >>> [a.change for a in record.data.actions]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rackcert.core.errors import InputError, RackcertError
from rackcert.core.placement import gpudirect_warnings, place
from rackcert.core.runs import RunDir, utc_now
from rackcert.core.spec_loader import LoadedSpec
from rackcert.core.stage_records import PlanData, PlanRecord, ProvisionData, ProvisionRecord

Confirm = Callable[[list[Any]], bool]
"""Called with the planned actions before any change; return True to apply them."""
EventHook = Callable[[str, Any, str], None]
"""apply's progress hook: (kind, action, detail), kind start/progress/done/skipped."""


def run_plan(loaded: LoadedSpec, run: RunDir) -> PlanRecord:
    """Discover the rack in one PropertyCollector call and plan; record plan.json.

    Changes nothing. An empty plan means the rack is provisioned.
    """
    from provision.discovery import discover
    from provision.planner import left_alone
    from provision.session import connect

    started = utc_now()
    with connect(loaded.spec) as si:
        inventory = discover(si, esxcli=True)
        agents = left_alone(inventory)
        data = PlanData(observed=inventory, left_alone=agents)
        try:
            data.actions = _plan(loaded, inventory)
        except RackcertError as exc:
            run.write_stage("plan", data, status="failed", error=str(exc), started_at=started)
            raise
        data.waves = plan_waves(si, data.actions)
    data.warnings = gpudirect_warnings(loaded.spec, place(loaded.spec))
    record = run.write_stage("plan", data, started_at=started)
    assert isinstance(record, PlanRecord)
    return record


def run(
    loaded: LoadedSpec,
    run_dir: RunDir,
    *,
    yes: bool = False,
    power_cycle: bool = False,
    confirm: Confirm | None = None,
    on_plan: Callable[[list[Any]], None] | None = None,
    on_event: EventHook | None = None,
    timeouts: Any = None,
    power_on: bool = True,
    guard: Callable[[Any], None] | None = None,
    pace: Any = None,
) -> ProvisionRecord:
    """Apply the plan: hosts one at a time, then VMs; record provision.json; return it.

    Args:
        yes: apply without asking; otherwise `confirm(actions)` must say so.
        power_cycle: power off VMs in the way, then on again.
        confirm: asked before any change when not `yes` (None: refuse to change anything).
        on_plan: shown the planned actions (the CLI prints them as a table).
        on_event: apply's progress hook.
        timeouts: provision.host_steps.Timeouts (reboot, maintenance mode); None: its defaults.
        power_on: power the VMs on (ESXi checks their devices then); False leaves them off.
        guard: called with the discovered inventory before anything is planned or recorded;
            raises to refuse (`provision --rehearsed`: not the inventory rehearsed).
        pace: provision.pace.Pace (parallelism, hosts in maintenance at once); None: defaults.

    Before discovery it closes the maintenance windows an interrupted run of rackcert left
    open (marked in vCenter: provision/maintenance_mark.py), never an operator's.

    Raises a RackcertError (after recording) when a vCenter task fails, or when actions
    were skipped (provisioned partially: the record's status is partial).
    """
    from provision.apply import ApplyError, Timeouts, apply
    from provision.discovery import discover
    from provision.maintenance_mark import recover
    from provision.record_flush import flushing
    from provision.session import connect

    started = utc_now()
    with connect(loaded.spec) as si:
        if guard is None:  # a rehearsed inventory is acted on as it was rehearsed
            say = (lambda text: on_event("progress", None, text)) if on_event else None
            wait = timeouts.reboot if timeouts is not None else 1800.0
            recover(si, reboot_timeout=wait, say=say)
        before = discover(si)
        if guard is not None:
            guard(before)
        data = ProvisionData(observed_before=before)

        def write(
            status: str = "ok", error: str | None = None, snapshot: Any = None
        ) -> ProvisionRecord:
            record = run_dir.write_stage(
                "provision",
                data if snapshot is None else snapshot,
                status=status,
                error=error,
                started_at=started,
            )
            assert isinstance(record, ProvisionRecord)
            return record

        try:
            actions = _plan(loaded, before)
        except RackcertError as exc:
            write("failed", str(exc))
            raise
        if not power_on:  # --no-power-on: the VMs stay off, so there is nothing to wait for
            actions = [a for a in actions if a.kind not in ("vm.power_on", "vm.wait")]
        data.actions = list(actions)
        if not actions:
            data.observed_after = data.observed_before
            data.vms = vm_states(loaded.spec, before, {})
            return write()
        if on_plan is not None:
            on_plan(actions)
        if not yes:
            if confirm is None:
                raise InputError("provision changes the rack: pass --yes to apply without asking")
            if not confirm(actions):
                raise InputError("provision: not applied (declined)")

        with flushing(data, write) as flusher:  # written as it goes, and on SIGTERM
            error: RackcertError | None = None
            try:
                apply(
                    si,
                    actions,
                    data=data,
                    power_cycle=power_cycle,
                    on_event=on_event or (lambda _k, _a, _d: None),
                    on_done=flusher.changed,
                    timeouts=timeouts or Timeouts(),
                    power_on=power_on,
                    pace=pace,
                    run_id=f"rackcert run {run_dir.path.name}",
                    record_lock=flusher.lock,
                )
            except ApplyError as exc:
                error = exc
            from provision.renew import renewals

            try:
                data.observed_after = discover(si, esxcli=True)
                data.vms = vm_states(loaded.spec, data.observed_after, data.vms)
            except RackcertError as exc:
                error = error or exc
            data.session_renewals = renewals(si)
            if error is not None:
                flusher.final("failed", str(error))
                raise error
            record = flusher.final("partial" if data.skipped else "ok")
    if data.skipped:
        first = data.skipped[0]
        raise RackcertError(
            f"provisioned partially: {len(data.skipped)} action(s) skipped, first"
            f" {first.target}: {first.skipped} (recorded {run_dir.path / 'provision.json'})"
        )
    return record


def plan_waves(si: Any, actions: list[Any], limit: int | None = None) -> list[list[str]]:
    """The host waves provision will use (provision/pace.py); the cluster's HA configuration
    is read only when a host carries running VMs and `limit` is not given."""
    from provision.pace import cluster_tolerance, host_waves

    hosts: dict[str, bool] = {}
    for action in actions:
        if action.kind.startswith("host.") and not action.blocked:
            hosts[action.host] = bool(action.params.get("powered_on_vms"))
    busy = [a for a in actions if a.kind.startswith("host.") and a.params.get("powered_on_vms")]
    if busy and limit is None:
        limit = cluster_tolerance(si, busy[0].params["host_moid"])
    return host_waves(list(hosts.items()), limit or 1)


def _plan(loaded: LoadedSpec, inventory: Any) -> list[Any]:
    """The plan, with the guests' SSH authorized keys (cloud-init user-data) read first."""
    from provision.guestinfo import read_authorized_keys
    from provision.planner import plan, require_keys

    keys = read_authorized_keys(loaded.spec)
    actions = plan(loaded.spec, inventory, authorized_keys=keys)
    require_keys(actions, keys)
    return actions


def vm_states(spec: Any, inventory: Any, waits: dict[str, Any]) -> dict[str, Any]:
    """Each spec VM after provision: power state, Tools IP, what the wait saw, why it is off."""
    from provision.vmsettings import power_conflicts

    conflicts = power_conflicts(spec, place(spec), inventory)
    out: dict[str, Any] = {}
    for vm in spec.vms:
        seen = inventory.vm(vm.name)
        state: dict[str, Any] = {
            "exists": seen is not None,
            "power_state": seen.power_state if seen else None,
            "guest_ip": seen.guest_ip if seen else "",
            "address": vm.address,
        }
        state |= {k: v for k, v in waits.get(vm.name, {}).items() if k not in state}
        if vm.name in conflicts and (seen is None or seen.power_state != "poweredOn"):
            pci, holder = conflicts[vm.name]
            state["left_off"] = (
                f"shares passthrough device {pci} with {holder}, which runs"
                " (vSphere powers on one holder of a device at a time)"
            )
        out[vm.name] = state
    return out
