"""`rackcert validate`: check every node of the rack against its spec, in parallel."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from rackcert.cli.common import (
    RunOpt,
    RunsRootOpt,
    SpecArg,
    app,
    console,
    default_runs_root,
    err_console,
    load,
    open_or_create_run,
)
from rackcert.errors import RackcertError


@app.command("validate")
def validate_cmd(
    spec_path: SpecArg,
    node: Annotated[
        list[str] | None, typer.Option("--node", "-n", help="Only this VM (repeatable)")
    ] = None,
    check: Annotated[
        list[str] | None,
        typer.Option("--check", "-c", help="Only checks with this id or prefix: gpu.driver, gpu"),
    ] = None,
    skip: Annotated[
        list[str] | None,
        typer.Option("--skip", help="Leave out checks with this id or prefix (repeatable)"),
    ] = None,
    junit: Annotated[
        Path | None, typer.Option("--junit", help="Also write JUnit XML here (for CI)")
    ] = None,
    local: Annotated[
        bool,
        typer.Option("--local", help="Validate this machine as the spec's first (or --node) VM"),
    ] = False,
    tool_path: Annotated[
        str | None,
        typer.Option(
            "--tool-path",
            envvar="RACKCERT_TOOL_PATH",
            help="Directory put first on the nodes' PATH ({node} expands); for test fakes",
        ),
    ] = None,
    ssh_config: Annotated[
        Path | None,
        typer.Option("--ssh-config", help="SSH client config to use instead of rackcert's own"),
    ] = None,
    no_facts: Annotated[
        bool, typer.Option("--no-facts", help="Skip the pyinfra facts snapshot (facts.json)")
    ] = False,
    list_checks: Annotated[
        bool, typer.Option("--list", help="List the check ids with what each expects, and exit")
    ] = False,
    compare: Annotated[
        bool,
        typer.Option(
            "--compare/--no-compare",
            help="After the checks, diff with the rack's last certified (PASS) run",
        ),
    ] = True,
    runs_dir: RunsRootOpt = None,  # type: ignore[assignment]
    run: RunOpt = None,
) -> None:
    """Check every VM of the spec (GPUs, driver, CUDA, NVLink, OFED, RDMA, mounts, MTU, SSH
    trust, clock) and the hypervisor settings provision recorded, all nodes in parallel.

    Writes validate.json, facts.json and JUnit XML into the run directory. Exit 0 only when no
    check of severity error fails; an unreachable node is a failed node, the others still run.
    """
    from validation.checks import select

    if list_checks:
        _print_checks(select(None))
        return
    from validation.runner import validate

    loaded = load(spec_path)
    root = runs_dir or default_runs_root()
    run_dir = open_or_create_run(loaded, root, run)
    outcome = validate(
        loaded,
        run_dir,
        runs_root=root,
        nodes=node,
        checks=check,
        skip=skip,
        local=local,
        tool_path=tool_path,
        junit=junit,
        ssh_config=ssh_config,
        facts=not no_facts,
        console=err_console if err_console.is_terminal else None,
    )
    _print_outcome(outcome)
    regressions = _compare_with_certified(root, run_dir) if compare else []
    if outcome.ok and regressions:
        raise RackcertError(
            f"validate: {len(regressions)} regression(s) since the last certified run:"
            f" {regressions[0]}; record {outcome.record}"
        )
    if not outcome.ok:
        failing = outcome.summary["failing"]
        more = f" (+{len(failing) - 5} more)" if len(failing) > 5 else ""
        raise RackcertError(
            f"validate failed: {len(failing)} error-severity check(s) failed:"
            f" {', '.join(failing[:5])}{more}; record {outcome.record}"
        )


def _compare_with_certified(root: Path, run_dir) -> list[str]:  # noqa: ANN001 - RunDir
    """The after-upgrade view: what changed since the last certified run of this rack.

    A validate-only run has no benchmark figures, so only versions, settings, hardware
    and checks are compared; a missing bench is not a regression.
    """
    from rackcert.report.assemble import assemble
    from rackcert.report.diff import diff_records, format_diff, last_certified

    certified = last_certified(root, run_dir.meta["rack"], before=run_dir.path)
    if certified is None:
        console.print("no certified (PASS) run of this rack yet: nothing to compare with")
        return []
    d = diff_records(assemble(certified), assemble(run_dir))
    if "bench" not in run_dir.stages():
        d.figures = []
        d.regressions = [r for r in d.regressions if not r.startswith("verdict ")]
    console.print(f"compared with the last certified run {certified.path}", soft_wrap=True)
    for line in format_diff(d):
        console.print(line, soft_wrap=True)
    return d.regressions


def _print_checks(defs) -> None:
    from validation.hypervisor import HV_CHECKS

    table = Table()
    for col in ("id", "severity", "expects", "fix"):
        table.add_column(col)
    for d in [*defs, *HV_CHECKS]:
        table.add_row(d.id, d.severity.value, d.summary, d.fix)
    console.print(table)


def _print_outcome(outcome) -> None:
    for e in outcome.extra.get("host_keys", {}).get("enrolled", []):
        console.print(
            f"enrolled host key of {e['host']}: {e['key_type']} {e['fingerprint']}"
            " (first contact; enforced from now on)",
            soft_wrap=True,
            highlight=False,
        )
    table = Table(title="validate", title_justify="left")
    for col in ("node", "status", "pass", "fail", "error", "skip", "note"):
        table.add_column(col)
    rows = dict(outcome.nodes)
    for r in outcome.results:  # hypervisor-only nodes (ESXi hosts)
        rows.setdefault(r.node, {"status": None, "counts": {}, "error": ""})
    for name, info in rows.items():
        mine = [r for r in outcome.results if r.node == name]
        counts = {
            s: sum(r.status.value == s for r in mine) for s in ("pass", "fail", "error", "skip")
        }
        failing = any(
            r.severity.value == "error" and r.status.value in ("fail", "error") for r in mine
        )
        bad = info.get("status") == "failed" or failing
        status = "[red]FAILED[/]" if bad else "[green]passed[/]"
        note = info.get("error", "") if info.get("status") is not None else "hypervisor"
        table.add_row(name, status, *(str(counts[s]) for s in counts), note[:60])
    console.print(table)
    for r in outcome.results:
        if r.status.value in ("fail", "error"):
            sev = "red" if r.severity.value == "error" else "yellow"
            console.print(
                f"[{sev}]{r.status.value.upper()}[/] {r.node} {r.id}: {r.reason or 'failed'}"
                f" (observed: {r.observed or '-'}; expected: {r.expected or '-'})"
                + (f"\n    fix: {r.fix}" if r.fix else ""),
                soft_wrap=True,
            )
    s = outcome.summary
    verdict = "[green]OK[/]" if s["ok"] else "[red]FAILED[/]"
    console.print(
        f"{verdict} {s['passed']} passed, {s['failed']} failed, {s['errors']} errors,"
        f" {s['skipped']} skipped in {s['wall_seconds']:.1f}s; record {outcome.record};"
        f" JUnit {outcome.junit}",
        soft_wrap=True,
    )
