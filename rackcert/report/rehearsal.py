"""The report's rehearsal line, from the run's rehearsal.json (rackcert rehearse).

"rehearsed on a capture taken at T: N actions, 0 refusals", or the refusals themselves,
so an auditor sees that provision ran on a twin of this vCenter first, and what the twin
refused. Nothing when the run has no rehearsal.
"""

from __future__ import annotations

from rackcert.core.errors import RecordError
from rackcert.core.runs import RunDir
from rackcert.core.stage_records import RehearsalData


def line(data: RehearsalData) -> str:
    """The sentence for one rehearsal's data."""
    taken = data.capture.taken_at if data.capture else "?"
    text = (
        f"rehearsed on a capture taken at {taken}: {len(data.actions)} actions,"
        f" {len(data.refusals)} refusals"
    )
    if data.refusals:
        text += ": " + "; ".join(f"{r.target}: {r.message}" for r in data.refusals[:3])
        if len(data.refusals) > 3:
            text += f"; and {len(data.refusals) - 3} more"
    if data.second_plan:
        text += f"; second plan not empty ({len(data.second_plan)} actions)"
    return text


def rehearsal_line(run: RunDir) -> str | None:
    """The run's rehearsal in one sentence, None when it has none (or it is unreadable)."""
    try:
        record = run.read_record("rehearsal")
    except RecordError as exc:
        return f"rehearsal.json unreadable: {exc}"
    if record is None or not isinstance(record.data, RehearsalData):
        return None
    if record.status == "failed":
        return f"rehearsal failed: {record.error}"
    return line(record.data)
