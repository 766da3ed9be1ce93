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
from rich.markup import escape

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

PLAN_HELP = (
    "Show what provision would change: ATS, passthrough, reboots, VMs, each with its reason."
    "\n\nReads vCenter (the spec's vcenter block) in one PropertyCollector call, diffs it with"
    " the spec and records plan.json {observed, actions}. Changes nothing. Exit 0 also when the"
    " plan is empty (the rack is provisioned)."
)
PROVISION_HELP = (
    "Apply the plan: hosts one at a time (maintenance, ATS, passthrough, reboot), then VMs"
    " (created VMs are powered on unless --no-power-on)."
    "\n\nAsks before changing anything unless --yes. Hosts with powered-on VMs, and powered-on"
    " VMs, are left alone (and reported, exit 1) unless --power-cycle. A failed vCenter task"
    " stops the run with the task's message; provision.json records what was done, and a"
    " re-run finishes the job. Exit 0 when the rack matches the spec afterwards."
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
    """Apply the plan: hosts one at a time (maintenance, ATS, passthrough, reboot), then VMs.

    Asks before changing anything unless --yes. Hosts with powered-on VMs and powered-on
    VMs are left alone (and reported) unless --power-cycle. A failed vCenter task stops the
    run with the task's message; provision.json records what was done, and a re-run
    finishes the job. Exit 0 when the rack matches the spec afterwards.
    """
    import provision
    from provision.host_steps import Timeouts

    loaded = load(spec_path)
    guard = None
    if rehearsed is not None:
        from provision.rehearse import check_rehearsed

        guard = check_rehearsed(rehearsed, loaded)
        run = run or rehearsed  # the real provision joins its rehearsal's run
    run_dir = open_or_create_run(loaded, runs_dir or default_runs_root(), run)
    title = f"provision rack {loaded.spec.metadata.name}"

    def planned(actions: list[Any]) -> None:
        if not as_json:
            show_actions(console, actions, title)
        bar.expect(len(actions))

    with _Progress(quiet=as_json) as bar:
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
        )
    path = run_dir.path / "provision.json"
    if as_json:
        data = record.data.model_dump(mode="json")
        print_json({k: data[k] for k in ("actions", "done", "skipped")} | {"record": str(path)})
        return
    show_provision(console, record, path)


class _Progress:
    """Rich progress bar over the plan's actions; the current step as its description."""

    def __init__(self, quiet: bool) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.quiet = quiet
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            console=err_console,
            transient=True,
            disable=quiet,
        )
        self.task = self.progress.add_task("provisioning", total=None, visible=False)

    def expect(self, total: int) -> None:
        """The plan is known: the bar counts its actions (shown from the first event on)."""
        self.progress.update(self.task, total=total)

    def __enter__(self) -> _Progress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)  # type: ignore[arg-type]

    def event(self, kind: str, action: Any, detail: str) -> None:
        self.progress.update(self.task, visible=True)
        if kind == "start" and action is not None:
            self.progress.update(self.task, description=f"{action.target}: {action.kind}")
        elif kind == "progress":
            self.progress.update(self.task, description=detail)
        elif kind in ("done", "skipped") and action is not None:
            self.progress.advance(self.task)
            if not self.quiet:
                mark = (
                    "[green]done[/]" if kind == "done" else f"[yellow]skipped[/] ({escape(detail)})"
                )
                self.progress.console.print(
                    f"{mark} {escape(action.target)}: {escape(action.change)}", emoji=False
                )
