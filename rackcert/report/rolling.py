"""The report's rolling-upgrade section, from the run's upgrade.json (rackcert upgrade).

Per node: its state, the guest versions before and after, the resume rule's evidence (each
figure and each check, measured on the node before and after, side by side) and findings,
who drained it and why (a failed node's finding), how long it was out of service and its
timeline of steps, so an auditor sees which node was certified again and which was not.
Nothing when the run has no roll.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rackcert.core.errors import RecordError
from rackcert.core.runs import RunDir
from rackcert.core.stage_records import UpgradeRecord
from rackcert.core.upgrade_layers import DRAIN, RESUME
from rackcert.report.record import UpgradeEvidence, UpgradeRow

PASSED = "pass"  # rackcert.core.results.Status.passed


def _t(stamp: str) -> datetime | None:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def _figure(figures: dict[str, Any], reference: dict[str, Any], name: str, shared: bool) -> str:
    """The figure; with its machine's reference and the node's share of it where the judge
    compared shares (rackcert.upgrade.judge: a reference on both sides)."""
    if name not in figures:
        return ""
    value = figures[name]
    if not shared:
        return f"{value:g}"
    ref = reference[name]
    return f"{value:g} (reference {ref:g}, share {value / ref:.3g})"


def evidence(before: dict[str, Any], after: dict[str, Any]) -> list[UpgradeEvidence]:
    """Figures, then checks that passed on either side, before and after side by side."""
    rows = []
    b_fig, a_fig = before.get("figures", {}), after.get("figures", {})
    b_ref, a_ref = before.get("reference") or {}, after.get("reference") or {}
    for name in sorted(b_fig.keys() | a_fig.keys()):
        shared = bool(b_ref.get(name)) and bool(a_ref.get(name))
        rows.append(
            UpgradeEvidence(
                name=name,
                before=_figure(b_fig, b_ref, name, shared),
                after=_figure(a_fig, a_ref, name, shared),
            )
        )
    b_chk, a_chk = before.get("checks", {}), after.get("checks", {})
    for check in sorted(b_chk.keys() | a_chk.keys()):
        if PASSED in (b_chk.get(check), a_chk.get(check)):
            rows.append(
                UpgradeEvidence(name=check, before=b_chk.get(check, ""), after=a_chk.get(check, ""))
            )
    return rows


def upgrade_section(run: RunDir) -> tuple[list[UpgradeRow], str | None]:
    try:
        record = run.read_record("upgrade")
    except RecordError as exc:
        return [], f"upgrade.json unreadable: {exc}"
    if not isinstance(record, UpgradeRecord):
        return [], None
    data = record.data
    rows = []
    for node in data.nodes:
        drain = next((s for s in node.steps if s.step == DRAIN.name), None)
        resume = next((s for s in node.steps if s.step.endswith(RESUME.name)), None)
        start = _t(drain.started_at) if drain else None
        end = _t(resume.ended_at) if resume and resume.ended_at else None
        minutes = (end - start).total_seconds() / 60 if start and end else None
        rows.append(
            UpgradeRow(
                node=node.name,
                host=node.host,
                state=node.state,
                before=node.versions_before,
                after=node.versions_after,
                reason=node.reason,
                out_minutes=round(minutes, 1) if minutes is not None else None,
                forced_power_off=node.forced_power_off,
                evidence=evidence(node.baseline, node.after),
                findings=list(node.findings),
                timeline=[
                    f"{s.step}: {s.status} {s.started_at[11:19]}..{s.ended_at[11:19]}"
                    for s in node.steps
                ],
            )
        )
    status = f"{data.status} (from certified run {data.certified_run})"
    if data.stopped_because:
        status += f": {data.stopped_because}"
    if data.start_verdict and data.start_verdict != "PASS":
        failing = ", ".join(data.start_failing[:5])
        more = f" (+{len(data.start_failing) - 5} more)" if len(data.start_failing) > 5 else ""
        status += (
            f"; started from a run that is not certified (verdict {data.start_verdict},"
            f" --allow-uncertified-start){': failing ' + failing + more if failing else ''}"
        )
    if data.uncertified:
        status += f"; uncertified versions allowed: {len(data.uncertified)}"
    return rows, status
