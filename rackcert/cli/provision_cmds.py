"""`rackcert plan` and `rackcert provision`: the vSphere stage.

plan: discover the rack (one PropertyCollector call) and print what must change.
provision: the same, then apply it (hosts first, then VMs) and record
observed_before, actions, done and observed_after in provision.json.
pyVmomi is imported lazily, inside the commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from rackcert.cli.common import (
    JsonOpt,
    RunOpt,
    RunsRootOpt,
    SpecArg,
    app,
    confirm_apply,
    console,
    default_runs_root,
    err_console,
    load,
    open_or_create_run,
    print_json,
)
from rackcert.cli.display import show_actions, show_plan, show_provision
from rackcert.cli.provision_live import ProvisionProgress

PLAN_HELP = (
    "Show what provision would change: ATS, passthrough, reboots, VMs, each with its reason."
    "\n\nReads vCenter (the spec's vcenter block) in one PropertyCollector call, diffs it with"
    " the spec and records plan.json {observed, actions}. Changes nothing. Exit 0 also when the"
    " plan is empty (the rack is provisioned)."
)
PROVISION_HELP = (
    "Apply the plan: hosts in parallel (maintenance, ATS, passthrough, reboot), then each"
    " host's VMs (clone, customize, power on, wait; --parallelism tasks in flight; created VMs"
    " are powered on unless --no-power-on)."
    "\n\nAsks before changing anything unless --yes. Hosts with powered-on VMs, and powered-on"
    " VMs, are left alone (and reported, exit 1) unless --power-cycle. A failed vCenter task"
    " stops only its host's (or VM's) lane; the others finish, and the exit names every"
    " failed host. provision.json records each host's and VM's state and each task's start"
    " and end; a re-run finishes the job. Exit 0 when the rack matches the spec afterwards."
)


@app.command("plan", help=PLAN_HELP)
def plan_cmd(
    spec_path: SpecArg,
    as_json: JsonOpt = False,
    runs_dir: RunsRootOpt = None,  # type: ignore[assignment]
    run: RunOpt = None,
) -> None:
    """Show what provision would change: ATS, passthrough, reboots, VMs, each with its reason.

    Reads vCenter (spec's vcenter block) in one PropertyCollector call, diffs it with the
    spec and records plan.json {observed, actions}. Changes nothing. Exit 0 also when the
    plan is empty (the rack is provisioned).
    """
    from provision import run_plan

    loaded = load(spec_path)
    run_dir = open_or_create_run(loaded, runs_dir or default_runs_root(), run)
    record = run_plan(loaded, run_dir)
    path = run_dir.path / "plan.json"
    if as_json:
        print_json(record.data.model_dump(mode="json") | {"record": str(path)})
        return
    show_plan(console, record, path, loaded.spec.metadata.name)


@app.command("provision", help=PROVISION_HELP)
def provision_cmd(
    spec_path: SpecArg,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Apply without asking")] = False,
    power_cycle: Annotated[
        bool,
        typer.Option(
            "--power-cycle",
            help="Power off VMs that are in the way (a host to reboot, a VM to change),"
            " then power them on again",
        ),
    ] = False,
    no_power_on: Annotated[
        bool,
        typer.Option(
            "--no-power-on",
            help="Create VMs powered off (ESXi checks passthrough devices only at power-on)",
        ),
    ] = False,
    reboot_timeout: Annotated[
        float,
        typer.Option(
            "--reboot-timeout",
            help="Seconds to wait for a rebooted host to be back (later boot time, connected)",
            min=1,
        ),
    ] = 1800.0,
    maintenance_timeout: Annotated[
        float,
        typer.Option(
            "--maintenance-timeout",
            help="Seconds vCenter may take to put a host in maintenance mode before it gives up",
            min=1,
        ),
    ] = 600.0,
    parallelism: Annotated[
        int,
        typer.Option(
            "--parallelism",
            help="vCenter tasks (clones, reconfigurations, power-ons) in flight at once",
            min=1,
        ),
    ] = 10,
    max_hosts_in_maintenance: Annotated[
        int | None,
        typer.Option(
            "--max-hosts-in-maintenance",
            help="Hosts with running VMs (--power-cycle) in maintenance at once; default:"
            " what the cluster can lose (HA admission control's failover level, else 1)."
            " Hosts without running VMs are prepared all at once",
            min=1,
        ),
    ] = None,
    rehearsed: Annotated[
        Path | None,
        typer.Option(
            "--rehearsed",
            help="Act only on the inventory rehearsed in this run (rackcert rehearse);"
            " provision records into that run unless --run says otherwise",
        ),
    ] = None,
    as_json: JsonOpt = False,
    runs_dir: RunsRootOpt = None,  # type: ignore[assignment]
    run: RunOpt = None,
) -> None:
    """Apply the plan: hosts in parallel (maintenance, ATS, passthrough, reboot), then VMs.

    Asks before changing anything unless --yes. Hosts with powered-on VMs and powered-on
    VMs are left alone (and reported) unless --power-cycle. A failed vCenter task stops its
    own lane only; provision.json records what was done, and a re-run finishes the job.
    Exit 0 when the rack matches the spec afterwards.
    """
    import provision
    from provision.host_steps import Timeouts
    from provision.pace import Pace

    loaded = load(spec_path)
    guard = None
    if rehearsed is not None:
        from rackcert.rehearse import check_rehearsed

        guard = check_rehearsed(rehearsed, loaded)
        run = run or rehearsed  # the real provision joins its rehearsal's run
    run_dir = open_or_create_run(loaded, runs_dir or default_runs_root(), run)
    title = f"provision rack {loaded.spec.metadata.name}"

    def planned(actions: list[Any]) -> None:
        if not as_json:
            show_actions(console, actions, title)
        bar.expect(len(actions))

    with ProvisionProgress(err_console, quiet=as_json) as bar:
        record = provision.run(
            loaded,
            run_dir,
            yes=yes,
            power_cycle=power_cycle,
            confirm=confirm_apply,
            on_plan=planned,
            on_event=bar.event,
            timeouts=Timeouts(reboot=reboot_timeout, maintenance=maintenance_timeout),
            power_on=not no_power_on,
            guard=guard,
            pace=Pace(
                parallelism=parallelism,
                max_hosts_in_maintenance=max_hosts_in_maintenance,
            ),
        )
    path = run_dir.path / "provision.json"
    if as_json:
        data = record.data.model_dump(mode="json")
        keys = ("actions", "done", "skipped", "hosts", "vms")
        print_json({k: data[k] for k in keys} | {"record": str(path)})
        return
    show_provision(console, record, path)
