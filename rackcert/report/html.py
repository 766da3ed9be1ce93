"""The self-contained HTML report: one file, styles and SVG figures inlined, works offline.

Rendered from the assembled record only (jinja2, autoescaped). The same HTML
feeds the PDF (`rackcert.report.pdf`), so both show the same content.

Example:
    html = render_html(assemble(run))
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from rackcert.core.localisation import read_localisation
from rackcert.core.results import CheckResult, Status
from rackcert.core.secrets import REDACTOR, Redactor
from rackcert.core.untrusted import cap_strings
from rackcert.report.record import RunRecord

TEMPLATES = Path(__file__).parent / "templates"
# The policy report.html carries itself, for when it is opened from disk (no server sends a
# header then): no script, fetch, form, frame or base change. `rackcert serve` sends the same
# with frame-ancestors and sandbox, which a <meta> policy cannot carry.
PAGE_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:;"
    " base-uri 'none'; form-action 'none'"
)
SHOWN = 512  # characters of one value the report shows (the page and the PDF)
_STATUS_ORDER = {Status.failed: 0, Status.error: 1, Status.skipped: 2, Status.passed: 3}


def checks_by_node(checks: list[CheckResult]) -> list[dict[str, Any]]:
    """Nodes with failures first (most failures first), each node's failures first."""
    groups: dict[str, list[CheckResult]] = defaultdict(list)
    for c in checks:
        groups[c.node].append(c)
    out = []
    for node, items in groups.items():
        items.sort(key=lambda c: (_STATUS_ORDER.get(c.status, 9), c.id))
        bad = sum(1 for c in items if c.status in (Status.failed, Status.error))
        out.append(
            {
                "node": node,
                "checks": items,
                "failed": bad,
                "passed": sum(1 for c in items if c.status == Status.passed),
                "skipped": sum(1 for c in items if c.status == Status.skipped),
            }
        )
    out.sort(key=lambda g: (-g["failed"], g["node"]))
    return out


def _grouped_values(observed: dict[str, str]) -> list[tuple[str, list[str]]]:
    """{'esx01': 'a', 'esx02': 'a'} -> [('a', ['esx01', 'esx02'])]: short matrix cells."""
    by_value: dict[str, list[str]] = defaultdict(list)
    for where, value in observed.items():
        by_value[value].append(where)
    return sorted(by_value.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def _flatten(obj: Any, prefix: str = "") -> list[tuple[str, str]]:
    if isinstance(obj, dict):
        rows: list[tuple[str, str]] = []
        for key, value in obj.items():
            rows.extend(
                _flatten(value, f"{prefix}{key}." if isinstance(value, dict) else f"{prefix}{key}")
            )
        return rows
    if isinstance(obj, list):
        if any(isinstance(v, (dict, list)) for v in obj):
            return [(prefix.rstrip("."), f"{len(obj)} entries (see run.json)")]
        return [(prefix.rstrip("."), ", ".join(_cell(v) for v in obj))]
    return [(prefix.rstrip("."), _cell(obj))]


def _cell(value: Any) -> str:
    """Numbers people can read: 638.9, 341,508,096; everything else as text."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1e5 else f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 1e5 else str(value)
    return str(value)


def _software_columns(software: dict[str, dict[str, str]]) -> list[str]:
    preferred = [
        "os",
        "kernel",
        "nvidia_driver",
        "cuda",
        "ofed",
        "nic_firmware",
        "container_toolkit",
        "nccl",
        "torch",
        "horovod",
        "gpu_model",
    ]
    keys = {k for v in software.values() for k in v}
    return [k for k in preferred if k in keys] + sorted(keys - set(preferred))


def _figures(record: RunRecord) -> dict[str, str | None]:
    from rackcert.report import plots

    bench = record.bench
    scaling = (
        plots.scaling_svg(bench.resnet50, bench.reference_resnet50)
        if bench.resnet50 and bench.resnet50.points
        else None
    )
    allreduce = (
        plots.allreduce_svg(bench.allreduce) if bench.allreduce and bench.allreduce.points else None
    )
    loc = read_localisation(record.bench.localise)
    heatmap = plots.link_heatmap_svg(loc) if loc and len(loc.names()) > 1 and loc.links else None
    burnin = (
        {node: plots.burnin_node_svg(node, s.t, s.gpus) for node, s in record.burnin.series.items()
         if s.gpus and s.t}
        if record.burnin is not None
        else {}
    )  # fmt: skip
    return {"scaling": scaling, "allreduce": allreduce, "heatmap": heatmap, "burnin": burnin}


def _localisation(record: RunRecord) -> dict[str, Any] | None:
    """The per-node table (each node's figures, the median of its links, what names it), the
    per-GPU rows and the findings, from bench's localisation part; None without one."""
    loc = read_localisation(record.bench.localise)
    if loc is None:
        return None
    columns = sorted({k for n in loc.nodes for k in n.figures})
    gpu_columns = sorted({k for n in loc.nodes for _pci, f in n.gpus for k in f})
    named = loc.named_nodes()
    rows = []
    for name in loc.names():
        node = next((n for n in loc.nodes if n.node == name), None)
        links = [x.gbps for x in loc.links if name in (x.a, x.b) and x.gbps is not None]
        found = named.get(name, [])
        rows.append(
            {
                "node": name,
                "figures": [(node.figures.get(c) if node else None) for c in columns],
                "bad": {f.figure for f in found},
                "links": len(links),
                "link_median": statistics.median(links) if links else None,
                "named": [f.message or f.check for f in found],
            }
        )
    gpus = [
        {
            "node": n.node,
            "pci": pci,
            "figures": [figures.get(c) for c in gpu_columns],
            "named": any(f.kind == "gpu" and f.gpu == pci for f in named.get(n.node, [])),
        }
        for n in loc.nodes
        for pci, figures in n.gpus
    ]
    return {
        "columns": columns,
        "rows": rows,
        "gpu_columns": gpu_columns,
        "gpus": gpus,
        "findings": loc.findings,
        "rule": _flatten(loc.rule),
        "links": len(loc.links),
    }


def _scaling_rows(record: RunRecord) -> list[dict[str, Any]]:
    res = record.bench.resnet50
    if res is None:
        return []
    from rackcert.report.plots import scaling_axis

    by_gpus = scaling_axis(res) == "gpus"
    ref = {r.nodes: r.images_per_sec for r in record.bench.reference_resnet50}
    rows = []
    for p in sorted(res.points, key=lambda p: (p.nodes, p.gpus)):
        reference = ref.get(p.gpus if by_gpus else p.nodes)  # the seed: one GPU per node
        rows.append(
            {
                "point": p,
                "reference": reference,
                "vs_reference": (p.images_per_sec / reference - 1) if reference else None,
            }
        )
    return rows


def _allreduce_summary(record: RunRecord) -> dict[str, Any] | None:
    ar = record.bench.allreduce
    if ar is None or not ar.points:
        return None
    peak = max(ar.points, key=lambda p: p.busbw_gbps)
    largest = max(ar.points, key=lambda p: p.size_bytes)
    return {
        "peak": peak,
        "largest": largest,
        "wrong": [p for p in ar.points if not p.correct],
        "sizes": (min(p.size_bytes for p in ar.points), largest.size_bytes),
    }


def context(record: RunRecord) -> dict[str, Any]:
    """Everything the template needs, computed once (and testable without the template)."""
    return {
        "r": record,
        "csp": PAGE_CSP,
        "checks": checks_by_node(record.checks),
        "matrix_rows": [(row, _grouped_values(row.observed)) for row in record.matrix.rows],
        "software_columns": _software_columns(record.software),
        "scaling_rows": _scaling_rows(record),
        "allreduce": _allreduce_summary(record),
        "storage_rows": _flatten(record.bench.storage) if record.bench.storage else [],
        "environment_rows": _flatten(record.bench.environment),
        "figures": _figures(record),
        "localisation": _localisation(record),
        "size_label": _size_label,
        "present": {s.stage for s in record.stages if s.present},
    }


def _size_label(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:g} {unit}"
    return f"{n} B"


def scrubbed(record: RunRecord, redactor: Redactor = REDACTOR) -> RunRecord:
    """The record with every known secret masked in every string, before anything renders it.

    Scrubbing the rendered page alone misses a secret that escaping changed
    (`&` becomes `&amp;`) or that a figure drew as SVG text. Every string is also cut to
    SHOWN characters: one long value from a node made the PDF layout run for minutes; the
    whole value stays in the run's records.
    """
    return RunRecord.model_validate(
        cap_strings(redactor.scrub(record.to_json()), SHOWN, "run.json")
    )


def render_html(record: RunRecord, redactor: Redactor = REDACTOR) -> str:
    """The report as one HTML document (secrets masked, nothing fetched from elsewhere)."""
    import jinja2

    record = scrubbed(record, redactor)
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = lambda v, d=1: f"{v:,.{d}f}" if isinstance(v, (int, float)) else "-"
    env.filters["pct"] = lambda v, d=1: f"{v * 100:.{d}f}%" if isinstance(v, (int, float)) else "-"
    env.filters["signed_pct"] = lambda v: (
        f"{round(v * 100, 1) + 0.0:+.1f}%" if isinstance(v, (int, float)) else "-"
    )
    html = env.get_template("report.html.j2").render(**context(record))
    return redactor.scrub(html)  # and again over the page, in its escaped forms too
