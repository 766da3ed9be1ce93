"""`rackcert upgrade SPEC`: roll the rack to SPEC's versions node by node, in service.

The plan and the roll are the upgrade stage's (rackcert.upgrade); the real ports are wired
by rackcert.rollout. `--plan` changes nothing: it prints the layers, the order, the waves
and each node's steps, and exits 2 when the roll would be refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from rackcert.cli.common import (
    JsonOpt,
    MetricsTextfileOpt,
    RunsRootOpt,
    app,
    console,
    default_runs_root,
    err_console,
    load,
    print_json,
)
from rackcert.core.errors import InputError, RackcertError
from rackcert.core.untrusted import markup


@app.command("upgrade")
def upgrade_cmd(
    spec_path: Annotated[
        Path,
        typer.Argument(
            help="The rack's spec with the new versions (its last certified run is the start)",
            show_default=False,
        ),
    ],
    plan_only: Annotated[
        bool, typer.Option("--plan", help="Show the layers, order, waves and steps; change nothing")
    ] = False,
    max_unavailable: Annotated[
        str,
        typer.Option(
            "--max-unavailable",
            help="Nodes out of service at once per Slurm partition: a count (1) or a share (25%)",
        ),
    ] = "1",
    max_failures: Annotated[
        int,
        typer.Option("--max-failures", min=1, help="Stop the roll after this many failed nodes"),
    ] = 1,
    order: Annotated[
        str | None,
        typer.Option(
            "--order",
            help="Node order: a comma-separated node list (their hosts first), or least-busy",
        ),
    ] = None,
    allow_uncertified: Annotated[
        bool,
        typer.Option(
            "--allow-uncertified",
            help="Roll versions the certified matrix does not list (the record says so)",
        ),
    ] = False,
    allow_uncertified_start: Annotated[
        bool,
        typer.Option(
            "--allow-uncertified-start",
            help="Roll from a start run whose verdict is not PASS (the record and report say so)",
        ),
    ] = False,
    drain_timeout: Annotated[
        float,
        typer.Option("--drain-timeout", min=1, help="Seconds a node may take to finish its jobs"),
    ] = 3600.0,
    drain_policy: Annotated[
        str,
        typer.Option(
            "--drain-policy", help="After --drain-timeout: wait (keep waiting), skip, or stop"
        ),
    ] = "wait",
    shutdown_timeout: Annotated[
        float,
        typer.Option(
            "--shutdown-timeout", min=1, help="Seconds for a guest shutdown before PowerOff"
        ),
    ] = 300.0,
    rollback: Annotated[
        str | None,
        typer.Option(
            "--rollback",
            help="Return this failed node (and its host) to the certified versions, then resume it",
        ),
    ] = None,
    certified_run: Annotated[
        Path | None,
        typer.Option("--certified-run", help="Start from this run (default: the last certified)"),
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Roll without asking first (needed off a terminal)")
    ] = False,
    runs_root: RunsRootOpt = None,  # type: ignore[assignment]
    as_json: JsonOpt = False,
    metrics_textfile: MetricsTextfileOpt = None,
) -> None:
    """Upgrade a certified rack node by node, each node certified again before it returns.

    The difference from the last certified run's spec picks the layers (ESXi image and its
    components such as the vGPU manager; guest driver, CUDA, OFED, toolkit, NCCL). Per host:
    drain its nodes in Slurm, wait for DRAINED, shut the guests down, patch the host in
    maintenance (rackcert's mark), reboot, power on, apply the guest layer, validate, and
    resume each node only when the new versions show and nothing got worse. Killed, the same
    command continues from upgrade.json. docs/upgrade.md explains the states and refusals.
    """
    from rackcert.rollout import open_roll, plan_roll, start_roll

    if metrics_textfile is not None:
        from rackcert.metrics.textfile import check_target

        check_target(metrics_textfile)
    if drain_policy not in ("wait", "skip", "stop"):
        raise InputError(f"--drain-policy {drain_policy!r}: wait, skip or stop")
    root = runs_root or default_runs_root()
    loaded = load(spec_path)
    order_list = [n.strip() for n in order.split(",") if n.strip()] if order else None
    planned = plan_roll(
        loaded,
        root,
        max_unavailable=max_unavailable,
        max_failures=max_failures,
        order=order_list,
        allow_uncertified=allow_uncertified,
        allow_uncertified_start=allow_uncertified_start,
        certified_run=certified_run,
        read_scheduler=not plan_only,
    )
    plan = planned.plan
    if plan_only:
        if as_json:
            print_json(plan.to_dict())
        else:
            for line in plan.lines():
                style = "bold red" if line.startswith("refused:") else ""
                console.print(f"[{style}]{markup(line)}[/]" if style else markup(line))
        _refuse(plan.blocking())
        return
    _refuse(plan.blocking())
    if not plan.changes and rollback is None:
        console.print(f"nothing to upgrade: {markup(loaded.spec.metadata.name)} already at SPEC")
        return
    import sys

    if plan.scheduler == "ask" and not sys.stdin.isatty():
        raise InputError(
            "the spec names no scheduler (slurm, upgrade.hooks): the roll must ask before it"
            " takes each node out, and there is no terminal to ask on; add upgrade.hooks"
        )
    if not yes:
        if not sys.stdin.isatty():
            raise InputError(
                "upgrade takes nodes out of service: pass --yes to roll without asking"
            )
        if not typer.confirm(f"Roll {len(plan.units)} host(s) in {len(plan.waves)} wave(s)?"):
            raise typer.Abort()
    policy: Literal["wait", "skip", "stop"] = drain_policy  # type: ignore[assignment]
    roll = open_roll(
        planned,
        loaded,
        root,
        ask=lambda question: typer.confirm(question, default=False),
        drain_timeout=drain_timeout,
        drain_policy=policy,
        shutdown_timeout=shutdown_timeout,
        say=lambda line: err_console.print(markup(line), highlight=False),
    )
    try:
        data = start_roll(roll, rollback=rollback)
    finally:
        if metrics_textfile is not None:
            _write_metrics(roll.rec.run, metrics_textfile)
    if as_json:
        print_json(data.model_dump(mode="json"))
    else:
        for node in data.nodes:
            extra = f": {node.reason}" if node.reason else ""
            console.print(f"{markup(node.name)}: {node.state}{markup(extra)}")
        console.print(f"record: {markup(str(roll.rec.run.path / 'upgrade.json'))}")
    if rollback is not None:
        # The rollback's outcome is the node's: the roll it belongs to may stay stopped (the
        # failure it rolled back counted), which is the next forward run's to decide.
        back = next((n for n in data.nodes if n.name == rollback), None)
        if back is None or back.state != "rolled_back":
            why = f"{back.state}: {back.reason}" if back is not None else "not in the record"
            raise RackcertError(f"rollback of {rollback} did not finish: {why}")
        return
    if (
        data.status == "stopped"
        or data.failures
        or any(n.state in ("failed", "skipped") for n in data.nodes)
    ):
        raise RackcertError(
            f"upgrade {data.status}: {data.stopped_because or f'{data.failures} node(s) failed'}"
        )


def _write_metrics(run: Any, path: Path) -> None:
    """rackcert_upgrade_* from the record as it stands (also after a failure)."""
    from rackcert.core.stage_records import UpgradeRecord
    from rackcert.metrics.textfile import write_textfile
    from rackcert.metrics.upgrade import upgrade_families

    record = run.read_record("upgrade")
    if isinstance(record, UpgradeRecord):
        write_textfile(path, upgrade_families(record, record.rack))


def _refuse(lines: list[str]) -> None:
    if lines:
        more = f" (+{len(lines) - 1} more: rackcert upgrade SPEC --plan)" if len(lines) > 1 else ""
        raise InputError(f"upgrade refused: {lines[0]}{more}")
