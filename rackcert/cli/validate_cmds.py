"""`rackcert validate`: check every node of the rack against its spec, in parallel."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from rackcert.cli.common import (
    JsonOpt,
    MetricsTextfileOpt,
    RunOpt,
    RunsRootOpt,
    app,
    console,
    default_runs_root,
    err_console,
    load,
    open_or_create_run,
    print_json,
)
from rackcert.cli.display import health_check_json, show_health_check, show_validate
from rackcert.cli.output import show_table
from rackcert.core.errors import InputError, RackcertError
from rackcert.core.untrusted import markup

if TYPE_CHECKING:  # imported where used: every invocation imports this module (issue 55)
    from rackcert.core.stage_records import ValidateRecord


@app.command("validate")
def validate_cmd(
    spec_path: Annotated[
        Path | None,
        typer.Argument(
            help="Rack spec (YAML), e.g. inventories/lab.yaml (not needed with --list)",
            show_default=False,
        ),
    ] = None,
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
        bool,
        typer.Option(
            "--no-facts",
            help="Leave the report's snapshot (packages, sysctl, firmware...) out of facts.json",
        ),
    ] = False,
    peers: Annotated[
        str | None,
        typer.Option(
            "--peers",
            help="ssh.peers: 'all' for the full mesh, or how many peers beyond the two ring"
            " neighbours each node checks (default 2, rotating between runs)",
        ),
    ] = None,
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
    health_check: Annotated[
        bool,
        typer.Option(
            "--health-check",
            help="On the node itself, as Slurm's HealthCheckProgram or prolog: the fast checks"
            " in under 30 s; under Slurm a failure drains the node (docs/slurm.md)",
        ),
    ] = False,
    health_record: Annotated[
        Path | None,
        typer.Option(
            "--health-record",
            help="With --health-check: where drains and resumes are appended"
            " (default /var/lib/rackcert/health-check.jsonl)",
        ),
    ] = None,
    metrics_textfile: MetricsTextfileOpt = None,
    runs_dir: RunsRootOpt = None,  # type: ignore[assignment]
    run: RunOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check every VM of the spec (GPUs, driver, CUDA, NVLink, OFED, RDMA, mounts, MTU, SSH
    trust, clock) and the hypervisor settings provision recorded, all nodes in parallel.

    Writes validate.json, facts.json and JUnit XML into the run directory. Exit 0 only when no
    check of severity error fails; an unreachable node is a failed node, the others still run.
    """
    if list_checks:
        _print_checks()
        return
    import validation
    from validation.peer_choice import parse_k

    peer_k = parse_k(peers)
    if spec_path is None:
        raise InputError("validate: give the rack spec (YAML), e.g. inventories/lab.yaml")
    if metrics_textfile is not None:
        from rackcert.metrics.textfile import check_target

        check_target(metrics_textfile)
    if health_check:
        _health_check(spec_path, node, tool_path, health_record, as_json, metrics_textfile)
        return
    loaded = load(spec_path)
    if not local:
        from rackcert.lab.routes import require_lab_up

        require_lab_up(loaded.spec)  # the lab's addresses, with the lab down, lead off the machine
    root = runs_dir or default_runs_root()
    run_dir = open_or_create_run(loaded, root, run)
    record = validation.run(
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
        peers=peer_k,
        console=err_console if err_console.is_terminal else None,
    )
    path = run_dir.path / "validate.json"
    data = record.data
    junit_path = junit or run_dir.path / "artifacts" / "validate" / "junit.xml"
    from rackcert.metrics.record_metrics import drift_since_certified, validate_run_families
    from rackcert.metrics.textfile import write_textfile

    found = _compare(run_dir, root, record, junit) if compare else None
    drift = drift_since_certified(run_dir, root) if compare else None
    if metrics_textfile is not None:
        write_textfile(metrics_textfile, validate_run_families(run_dir, record, drift))
    if as_json:
        # CI reads the record itself, and the comparison with the certified run.
        doc = {"run": str(run_dir.path), **(run_dir.read_stage("validate") or {})}
        items = [asdict(d) for d in drift[0]] if drift else []
        print_json({**doc, "comparison": found.to_dict() if found else None, "drift": items})
    else:
        show_validate(console, record, path, junit_path)
        if compare and found is None:
            console.print("no certified (PASS) run of this rack yet: nothing to compare with")
        elif found is not None:
            console.print(
                f"compared with the last certified run {markup(found.certified)}", soft_wrap=True
            )
            for line in found.changes:
                console.print(line, soft_wrap=True)
        if drift is not None:
            console.print(
                f"drift from the certified run {markup(drift[1])}: {len(drift[0])} item(s)",
                soft_wrap=True,
            )
            for item in drift[0]:
                console.print(item.line(), markup=False, soft_wrap=True)
    failing = data.summary.failing
    if failing:
        more = f" (+{len(failing) - 5} more)" if len(failing) > 5 else ""
        raise RackcertError(
            f"validate failed: {len(failing)} error-severity check(s) failed:"
            f" {', '.join(failing[:5])}{more}; record {path}"
        )
    if found is not None and found.regressions:
        raise RackcertError(
            f"validate: {len(found.regressions)} regression(s) since the last certified run:"
            f" {found.regressions[0]}; {run_dir.path / 'comparison.json'}"
        )


def _health_check(
    spec_path: Path,
    node: list[str] | None,
    tool_path: str | None,
    record: Path | None,
    as_json: bool,
    metrics_textfile: Path | None = None,
) -> None:
    """validation.healthcheck on this node: one line per failing check, exit 0 or 1."""
    from validation.healthcheck import DEFAULT_RECORD, run_health_check

    if node and len(node) > 1:
        raise InputError("--health-check checks this node: give at most one --node")
    spec = load(spec_path).spec
    outcome = run_health_check(
        spec,
        node=node[0] if node else None,
        tool_path=tool_path,
        record=record or DEFAULT_RECORD,
    )
    if metrics_textfile is not None:
        from rackcert.metrics.record_metrics import health_outcome_families
        from rackcert.metrics.textfile import write_textfile

        families = health_outcome_families(outcome, spec.metadata.name, time.time())
        write_textfile(metrics_textfile, families)
    if as_json:
        print_json(health_check_json(outcome))
    else:
        show_health_check(console, outcome)
    if not outcome.ok:
        raise typer.Exit(1)


def _compare(run_dir, root: Path, record: ValidateRecord, junit: Path | None):
    """The report layer's comparison with the last certified run (rackcert.report.upgrade),
    after the stage: regressions go to comparison.json and, as one failing case, to JUnit."""
    from rackcert.report import upgrade
    from validation.junit import write_junit

    found = upgrade.since_certified(run_dir, root)
    if found is None:
        return None
    upgrade.write(run_dir, found)
    if found.regressions:
        case = found.failing_case(run_dir.meta["rack"])
        results = [*record.data.results, case]
        write_junit(run_dir.artifacts("validate") / "junit.xml", results)
        if junit:
            write_junit(junit, results)
    return found


def _print_checks() -> None:
    """Every registered check: guests (scope node), then ESXi hosts, VMs and the rack."""
    from validation.checks import listed

    table = Table()
    for col in ("id", "severity", "scope", "expects", "fix"):
        table.add_column(col)
    for d in listed():
        table.add_row(d.id, d.severity.value, d.scope, d.summary, d.fix)
    show_table(console, table)
