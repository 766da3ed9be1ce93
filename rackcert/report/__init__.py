"""The report stage: the audit record (run.json), HTML/PDF report, manifest, diff, history page.

Everything here reads what the other stages recorded in a run directory and
nothing else: the verdict combines the stages' own recorded verdicts and
statuses, it is never re-derived from raw figures. Modules, one job each:
`record` (the pydantic model of run.json), `assemble` (stage files -> record),
`matrix` (certified reference data and the comparison), `plots`, `html`, `pdf`,
`manifest` (MANIFEST.sha256 and verify), `diff` (two runs), `serve` (history
page), `build` (the report stage end to end).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rackcert.core.runs import RunDir
    from rackcert.core.spec_loader import LoadedSpec
    from rackcert.core.stage_records import ReportRecord


def run(loaded: LoadedSpec | None, run_dir: RunDir, **options: Any) -> ReportRecord:
    """The report stage: run.json, HTML/PDF, report.json, MANIFEST.sha256; returns report.json
    typed. `loaded` is not read (the report is built from the run's records alone); it is
    there so every stage is called the same way. `options`: build_report's (formats,
    reference, matrix_dir).

        >>> run(None, RunDir.open("runs/lab/20260101T000000.000000Z")).data.verdict
        'FAIL'
    """
    from rackcert.report.build import build_report

    stage = build_report(run_dir, **options).stage
    assert stage is not None  # build_report writes report.json or raises
    return stage
