"""After an upgrade: what changed since the rack's last certified (PASS) run.

The report layer's work, not validate's: `rackcert validate` records its checks once
(validate.json), then the CLI asks this module to compare the run with the rack's last
certified one. A regression fails the command like a failing check of severity error,
and is written down where CI and the auditor look: `comparison.json` in the run
directory, and one failing `validate.regressions` case in the JUnit file, so the exit
code, the JUnit and the run directory say the same thing.

    >>> found = since_certified(run_dir, Path("runs"))
    >>> found.regressions if found else "no certified run yet"
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rackcert.core.results import CheckResult, Severity, Status
from rackcert.core.runs import RunDir, atomic_write_json

COMPARISON_FILE = "comparison.json"


@dataclass
class Comparison:
    certified: Path
    changes: list[str] = field(default_factory=list)
    regressions: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "compared_with": str(self.certified),
            "changes": self.changes,
            "regressions": self.regressions,
        }

    def failing_case(self, rack: str) -> CheckResult:
        """The regressions as one failing JUnit case (empty list: none to add)."""
        return CheckResult(
            id="validate.regressions",
            node=rack,
            severity=Severity.error,
            status=Status.failed,
            observed="; ".join(self.regressions[:5]),
            expected=f"no regression since {self.certified.name}",
            reason=f"{len(self.regressions)} regression(s) since the last certified run",
            fix="see `rackcert report diff` of the two runs",
        )


def since_certified(run_dir: RunDir, runs_root: Path) -> Comparison | None:
    """This run against the rack's last certified run before it (None: there is none).

    A validate-only run has no benchmark figures, so only versions, settings, hardware and
    checks are compared; a missing bench is not a regression.
    """
    from rackcert.core.runs import last_certified
    from rackcert.report.assemble import assemble
    from rackcert.report.diff import diff_records, format_diff

    certified = last_certified(runs_root, run_dir.meta["rack"], before=run_dir.path)
    if certified is None:
        return None
    d = diff_records(assemble(certified), assemble(run_dir))
    if "bench" not in run_dir.stages():
        d.figures = []
        d.regressions = [r for r in d.regressions if not r.startswith("verdict ")]
    return Comparison(certified.path, format_diff(d), list(d.regressions))


def write(run_dir: RunDir, comparison: Comparison) -> Path:
    """comparison.json in the run directory (validate.json stays as validate wrote it)."""
    path = run_dir.path / COMPARISON_FILE
    atomic_write_json(path, comparison.to_dict())
    return path
