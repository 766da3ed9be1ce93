"""The report's burn-in section: burnin.json's findings and each node's series, thinned.

Why apart: the series of a four-hour run at 1 s is ~14,400 points a GPU; the page plots at
most PLOT_POINTS a line (every k-th sample, the maximum of each stride for power and
temperature so a spike is not thinned away), and burnin.json keeps the whole series.

    section = burnin_section(run)   # None when the run has no burn-in
"""

from __future__ import annotations

from typing import Any

from rackcert.core.errors import RecordError
from rackcert.core.runs import RunDir
from rackcert.core.stage_records import BurninRecord
from rackcert.report.record import BurninSection, BurninSeries

PLOT_POINTS = 600
PLOTTED = ("sm_mhz", "power_w", "temp_c")


def _thin(values: list[Any], k: int, peak: bool) -> list[float | None]:
    out: list[float | None] = []
    for i in range(0, len(values), k):
        chunk = [v for v in values[i : i + k] if isinstance(v, int | float)]
        out.append((max(chunk) if peak else chunk[0]) if chunk else None)
    return out


def node_series(raw: dict[str, Any]) -> BurninSeries:
    """One node's series for the plots: clocks (sampled), power and temperature (peaks)."""
    series = raw.get("series") or {}
    t = series.get("t") or []
    k = max(1, -(-len(t) // PLOT_POINTS))
    gpus = {
        g: {f: _thin(col.get(f) or [], k, peak=f != "sm_mhz") for f in PLOTTED}
        for g, col in (series.get("gpus") or {}).items()
    }
    return BurninSeries(t=[float(x) for x in t[::k]], gpus=gpus)


def burnin_section(run: RunDir) -> BurninSection | None:
    try:
        record = run.read_record("burnin")
    except RecordError:
        return None
    if not isinstance(record, BurninRecord):
        return None
    d = record.data
    return BurninSection(
        verdict=d.verdict,
        duration_s=d.duration_s,
        findings=d.findings,
        reported=d.reported,
        gpus=d.gpus,
        unmeasured=d.unmeasured,
        series={node: node_series(raw) for node, raw in d.series().items()},
    )
