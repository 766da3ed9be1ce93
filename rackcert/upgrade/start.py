"""The run a roll starts from: of this rack, validated, and certified (or said not to be).

`--certified-run` took any directory: a run of another rack, one with no validate record, one
whose verdict was FAIL, and the record did not say so. A start is now read once, here:

- a run of another rack, or one without validate.json, is bad input (one line);
- a verdict other than PASS (FAIL, INCOMPLETE, or no report) is refused unless the operator
  passes --allow-uncertified-start; upgrade.json and the report then carry the start's
  verdict and its failing checks. The lab's verdict is FAIL (no GPU, no OFED): its explained
  failures fail before and after a node's roll alike and are no finding (judge.py).

    start = read_start(RunDir.open(path), "lab")
    if not start.certified: ...
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rackcert.core.errors import InputError, RecordError
from rackcert.core.runs import RunDir, summarize
from rackcert.core.stage_records import ValidateRecord

PASS = "PASS"
SHOWN = 5  # failing checks named in a refusal line (all are recorded)


@dataclass(frozen=True)
class Start:
    run: str
    verdict: str  # PASS, FAIL, INCOMPLETE, or "none" (no report.json)
    failing: list[str] = field(default_factory=list)  # "node: check status"

    @property
    def certified(self) -> bool:
        return self.verdict == PASS

    def line(self) -> str:
        """The start as the plan, the refusal and the report say it."""
        if self.certified:
            return f"start: run {self.run}, verdict PASS"
        failing = ", ".join(self.failing[:SHOWN])
        more = f" (+{len(self.failing) - SHOWN} more)" if len(self.failing) > SHOWN else ""
        what = f"; failing: {failing}{more}" if self.failing else ""
        return f"start: run {self.run} is not certified, verdict {self.verdict}{what}"


def read_start(run: RunDir, rack: str) -> Start:
    """The start's verdict and failing checks; InputError when it is not a start of `rack`."""
    meta_rack = run.meta.get("rack")
    if meta_rack != rack:
        raise InputError(
            f"certified run {run.path}: a run of rack {meta_rack!r}, not {rack!r}; give a run"
            f" of {rack}"
        )
    try:
        record = run.read_record("validate")
    except RecordError as exc:
        raise InputError(f"certified run {run.path}: {exc}") from None
    if not isinstance(record, ValidateRecord):
        raise InputError(
            f"certified run {run.path}: no validate record (validate.json); a roll judges"
            " nodes against a validated rack: run rackcert validate first"
        )
    summary = summarize(run.path)
    verdict = summary.verdict if summary.problem is None and summary.verdict else "none"
    failing = [
        f"{r.node}: {r.id} {r.status.value}"
        for r in record.data.results
        if r.status.value in ("fail", "error")
    ]
    return Start(run.path.name, verdict, failing)


def refusal(start: Start) -> list[str]:
    """The start's refusal line (empty when it is certified)."""
    if start.certified:
        return []
    return [
        f"{start.line().removeprefix('start: ')}; pass --allow-uncertified-start to roll from"
        " it anyway (upgrade.json and the report say so)"
    ]
