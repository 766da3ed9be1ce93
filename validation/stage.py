"""The validate stage below the CLI: checks, then the after-upgrade comparison, one record.

`run(loaded, run_dir, runs_root=...)` validates every node (validation.runner), then
compares with the rack's last certified (PASS) run: a regression since then fails the
stage like a failing check of severity error, in validate.json and in JUnit alike, so the
record, the report, CI and the exit code say the same thing. Failing checks are evidence,
not breakage: `run` returns the record either way and raises only for bad input.

    >>> record = run(load_spec("inventories/lab.yaml"), run_dir, runs_root=Path("runs"))
    >>> record.status, record.data.summary.failing, record.data.regressions
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rackcert.results import CheckResult, Severity, Status
from rackcert.runs import RunDir
from rackcert.spec_loader import LoadedSpec
from rackcert.stage_records import ValidateRecord
from validation.junit import write_junit
from validation.runner import Outcome, validate


def run(
    loaded: LoadedSpec,
    run_dir: RunDir,
    *,
    runs_root: Path,
    compare: bool = True,
    **options: Any,
) -> ValidateRecord:
    """Validate and record; `options` are validation.runner.validate's (nodes, checks, skip,
    local, tool_path, junit, ssh_config, facts, console)."""
    outcome = validate(loaded, run_dir, runs_root=runs_root, **options)
    record = run_dir.read_record("validate")
    assert isinstance(record, ValidateRecord)
    if compare:
        record = _compare(run_dir, runs_root, record, outcome, options.get("junit"))
    return record


def _compare(
    run_dir: RunDir, root: Path, record: ValidateRecord, outcome: Outcome, junit: Path | None
) -> ValidateRecord:
    """The after-upgrade view: what changed since the last certified run of this rack.

    A validate-only run has no benchmark figures, so only versions, settings, hardware and
    checks are compared; a missing bench is not a regression.
    """
    from rackcert.report.assemble import assemble
    from rackcert.report.diff import diff_records, format_diff, last_certified

    certified = last_certified(root, run_dir.meta["rack"], before=run_dir.path)
    if certified is None:
        return record
    d = diff_records(assemble(certified), assemble(run_dir))
    if "bench" not in run_dir.stages():
        d.figures = []
        d.regressions = [r for r in d.regressions if not r.startswith("verdict ")]
    data = record.data
    data.compared_with, data.changes, data.regressions = (
        str(certified.path),
        format_diff(d),
        list(d.regressions),
    )
    status, error = record.status, record.error
    if d.regressions:
        # JUnit agrees with the exit code: the regressions are one failing case.
        failing = CheckResult(
            id="validate.regressions",
            node=run_dir.meta["rack"],
            severity=Severity.error,
            status=Status.failed,
            observed="; ".join(d.regressions[:5]),
            expected=f"no regression since {certified.path.name}",
            reason=f"{len(d.regressions)} regression(s) since the last certified run",
            fix="see `rackcert report diff` of the two runs",
        )
        write_junit(run_dir.artifacts("validate") / "junit.xml", [*outcome.results, failing])
        if junit:
            write_junit(junit, [*outcome.results, failing])
        status = "failed"
        error = error or f"{len(d.regressions)} regression(s) since the last certified run"
    run_dir.write_stage("validate", data, status=status, error=error, started_at=record.started_at)
    fresh = run_dir.read_record("validate")
    assert isinstance(fresh, ValidateRecord)
    return fresh
