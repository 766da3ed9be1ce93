"""`report diff RUN_A RUN_B`: what changed between two runs, the after-upgrade view.

Both runs are assembled from their stage files (the evidence, not an old
run.json), then compared: versions per node, hypervisor settings, hardware,
checks that flipped, certified-matrix rows that changed, and benchmark figures
that moved beyond their measured spread. A regression (a check that went from
pass to fail, a figure worse beyond its spread, a matrix row that stopped
matching, a verdict that went down) makes the command exit non-zero.

Noise: a ResNet50 figure recorded with a spread moves when |b - a| exceeds the
two spreads added and `min_change` (2%) of a; a figure with no recorded spread
(allreduce busbw, storage) moves when it changes by more than `tolerance` (5%).
Localisation (issue 34): each link's Gb/s and each node's figures are compared one by
one, against the rack's own spread of that figure (1.4826 x MAD across links or nodes,
in each run) and never less than `tolerance`; a node, GPU or link the verdict names now
and did not name before is a regression of its own ("newly named").
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from rackcert.core.localisation import read_localisation
from rackcert.core.results import Severity, Status
from rackcert.core.untrusted import markup
from rackcert.report.record import RunRecord

_BAD = {Status.failed, Status.error}
_RANK = {"PASS": 2, "INCOMPLETE": 1, "FAIL": 0}


@dataclass
class Change:
    scope: str
    key: str
    before: str | None
    after: str | None


@dataclass
class Flip:
    node: str
    check: str
    before: str | None
    after: str | None
    severity: str
    kind: str  # regressed, fixed, changed, new, gone


@dataclass
class Move:
    figure: str
    before: float
    after: float
    change: float  # relative, (after - before) / before
    threshold: float  # relative change needed to count
    spread: str  # where the threshold came from
    moved: bool
    worse: bool


@dataclass
class Diff:
    run_a: str
    run_b: str
    verdict: tuple[str, str]
    versions: list[Change] = field(default_factory=list)
    settings: list[Change] = field(default_factory=list)
    hardware: list[Change] = field(default_factory=list)
    matrix: list[Change] = field(default_factory=list)
    checks: list[Flip] = field(default_factory=list)
    figures: list[Move] = field(default_factory=list)
    named: list[str] = field(default_factory=list)  # findings B names that A did not
    regressions: list[str] = field(default_factory=list)

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["verdict"] = {"before": self.verdict[0], "after": self.verdict[1]}
        out["regressed"] = self.regressed
        return out


def _dict_changes(a: dict[str, dict[str, str]], b: dict[str, dict[str, str]]) -> list[Change]:
    out = []
    for scope in sorted(a.keys() | b.keys()):
        da, db = a.get(scope, {}), b.get(scope, {})
        for key in sorted(da.keys() | db.keys()):
            if da.get(key) != db.get(key):
                out.append(Change(scope, key, da.get(key), db.get(key)))
    return out


def _host_versions(r: RunRecord) -> dict[str, dict[str, str]]:
    """Each host's versions; a driver VIB (as esxcli listed it) is one entry per VIB name."""
    out: dict[str, dict[str, str]] = {}
    for h in r.hardware.hosts:
        entry = {
            k: v
            for k, v in (
                ("esxi_version", h.esxi_version),
                ("esxi_build", h.esxi_build),
                ("bios_version", h.bios_version),
            )
            if v
        }
        for vib in h.driver_vibs:  # "name version (vendor)"
            name, _, rest = vib.partition(" ")
            entry[f"vib {name}"] = rest
        out[h.name] = entry
    return out


def _hardware(r: RunRecord) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for h in r.hardware.hosts:
        entry = {"server": f"{h.vendor} {h.model}".strip(), "gpus": str(len(h.gpus))}
        entry.update({f"gpu {g.pci}": g.model for g in h.gpus})
        entry.update({f"nic {n.pci}": n.model for n in h.nics})
        out[h.name] = entry
    for p in r.hardware.nvlink_pairs:
        out.setdefault(p.node, {})[f"nvlink {'-'.join(p.gpus) or 'pair'}"] = p.link
    return out


def _checks(a: RunRecord, b: RunRecord) -> list[Flip]:
    ia = {(c.node, c.id): c for c in a.checks}
    ib = {(c.node, c.id): c for c in b.checks}
    out = []
    for key in sorted(ia.keys() | ib.keys()):
        ca, cb = ia.get(key), ib.get(key)
        sa = ca.status if ca else None
        sb = cb.status if cb else None
        if sa == sb:
            continue
        severity = (cb or ca).severity  # type: ignore[union-attr]
        if ca is None:
            kind = "new"
        elif cb is None:
            kind = "gone"
        elif sb in _BAD and sa not in _BAD:
            kind = "regressed"
        elif sa in _BAD and sb not in _BAD:
            kind = "fixed"
        else:
            kind = "changed"
        out.append(
            Flip(
                node=key[0],
                check=key[1],
                before=sa.value if sa else None,
                after=sb.value if sb else None,
                severity=severity.value,
                kind=kind,
            )
        )
    return out


Figure = tuple[float, float | None, bool, bool]  # value, spread, higher is better, rack-wide


def _mad_spread(values: list[float]) -> float | None:
    """1.4826 x MAD: the rack's own spread of one figure (a robust sigma), from 3 values up."""
    if len(values) < 3:
        return None
    mid = statistics.median(values)
    return 1.4826 * statistics.median(abs(v - mid) for v in values)


def _localisation_figures(r: RunRecord) -> dict[str, Figure]:
    """Each link's Gb/s and each node's figures, spread = the rack's MAD of that figure in
    that run (how much links or nodes of one rack differ, a bound on one's own noise)."""
    loc = read_localisation(r.bench.localise)
    out: dict[str, Figure] = {}
    if loc is None:
        return out
    links = [x for x in loc.links if x.gbps is not None]
    spread = _mad_spread([x.gbps for x in links if x.gbps is not None])
    for x in links:
        a, b = sorted((x.a, x.b))
        out[f"link {a}<->{b} Gb/s"] = (x.gbps or 0.0, spread, True, True)
    for name in sorted({k for n in loc.nodes for k in n.figures}):
        values = {n.node: n.figures[name] for n in loc.nodes if name in n.figures}
        node_spread = _mad_spread(list(values.values()))
        lower_better = "latency" in name or name.endswith(("_us", "_ms", "_s"))
        for node, value in values.items():
            out[f"node {node} {name}"] = (value, node_spread, not lower_better, True)
    return out


def _named(a: RunRecord, b: RunRecord) -> list[str]:
    """The findings of B that name a node, GPU or link A's verdict did not name."""
    la = read_localisation(a.bench.localise)
    lb = read_localisation(b.bench.localise)
    if lb is None:
        return []
    before = {(f.kind, f.subject) for f in (la.findings if la else [])}
    return [f.message or f.check for f in lb.findings if (f.kind, f.subject) not in before]


def _figures(r: RunRecord) -> dict[str, Figure]:
    """figure -> (value, spread or None, higher is better, rack-wide: at least `tolerance`)."""
    out: dict[str, Figure] = {}
    if r.bench.resnet50:
        for p in r.bench.resnet50.points:
            where = f"{p.nodes} nodes" if p.gpus == p.nodes else f"{p.nodes} nodes/{p.gpus} GPUs"
            out[f"resnet50 images/s at {where}"] = (p.images_per_sec, p.spread, True, False)
            out[f"resnet50 scaling efficiency at {where}"] = (p.efficiency, None, True, False)
    ar = r.bench.allreduce
    if ar and ar.points:
        peak = max(p.busbw_gbps for p in ar.points)
        largest = max(ar.points, key=lambda p: p.size_bytes)
        out["allreduce peak busbw GB/s"] = (peak, None, True, False)
        out[f"allreduce busbw GB/s at {largest.size_bytes} B"] = (
            largest.busbw_gbps,
            None,
            True,
            False,
        )
    for key, value in _numbers(r.bench.storage or {}, "storage "):
        if "latency" in key:
            out[key] = (value, None, False, False)
        elif any(w in key for w in ("throughput", "iops", "mb_s", "mib_s", "gb_s")):
            out[key] = (value, None, True, False)
    return out | _localisation_figures(r)


def _numbers(obj: Any, prefix: str):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _numbers(v, f"{prefix}{k}.")
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield prefix.rstrip("."), float(obj)


def _moves(a: RunRecord, b: RunRecord, tolerance: float, min_change: float) -> list[Move]:
    fa, fb = _figures(a), _figures(b)
    out = []
    for name in [n for n in fa if n in fb]:
        (va, sa, up, rack), (vb, sb, _, _) = fa[name], fb[name]
        if va == 0:
            continue
        rel = (vb - va) / abs(va)
        if rack:
            # One link or node against the rack's spread, and never less than the tolerance
            # (a uniform rack's MAD is ~0: the run-to-run noise of one link is not).
            threshold = max(((sa or 0) + (sb or 0)) / abs(va), tolerance)
            source = f"rack spread ±{sa or 0:.3g} / ±{sb or 0:.3g}, at least {tolerance:.0%}"
        elif sa or sb:
            threshold = max(((sa or 0) + (sb or 0)) / abs(va), min_change)
            source = f"spreads ±{sa or 0:g} / ±{sb or 0:g}"
        else:
            threshold = tolerance
            source = f"no spread recorded: tolerance {tolerance:.0%}"
        moved = abs(rel) > threshold
        worse = moved and ((rel < 0) if up else (rel > 0))
        out.append(Move(name, va, vb, rel, threshold, source, moved, worse))
    return out


def diff_records(
    a: RunRecord, b: RunRecord, *, tolerance: float = 0.05, min_change: float = 0.02
) -> Diff:
    """Everything that changed from run A (before) to run B (after)."""
    versions = _dict_changes(
        {**_host_versions(a), **a.software}, {**_host_versions(b), **b.software}
    )
    matrix_a = {row.component: row.status for row in a.matrix.rows}
    matrix_b = {row.component: row.status for row in b.matrix.rows}
    result = Diff(
        run_a=f"{a.run.rack}/{a.run.run_id}",
        run_b=f"{b.run.rack}/{b.run.run_id}",
        verdict=(a.verdict.verdict, b.verdict.verdict),
        versions=versions,
        settings=_dict_changes(a.settings, b.settings),
        hardware=_dict_changes(_hardware(a), _hardware(b)),
        matrix=[
            Change("matrix", comp, matrix_a.get(comp), matrix_b.get(comp))
            for comp in sorted(matrix_a.keys() | matrix_b.keys())
            if matrix_a.get(comp) != matrix_b.get(comp)
        ],
        checks=_checks(a, b),
        figures=_moves(a, b, tolerance, min_change),
        named=_named(a, b),
    )
    result.regressions = _regressions(result)
    return result


def _regressions(d: Diff) -> list[str]:
    out = []
    before, after = d.verdict
    if _RANK.get(after, 0) < _RANK.get(before, 0):
        out.append(f"verdict {before} -> {after}")
    for f in d.checks:
        if f.severity == Severity.error.value and (
            f.kind == "regressed" or (f.kind == "new" and f.after in ("fail", "error"))
        ):
            out.append(f"check {f.check} on {f.node}: {f.before or 'absent'} -> {f.after}")
    for m in d.figures:
        if m.worse:
            out.append(
                f"{m.figure}: {m.before:,.2f} -> {m.after:,.2f} ({m.change:+.1%},"
                f" beyond {m.threshold:.1%})"
            )
    out += [f"newly named: {text}" for text in d.named]
    for c in d.matrix:
        if c.before == "matches" and c.after != "matches":
            out.append(f"certified matrix {c.key}: matches -> {c.after}")
    return out


def format_diff(d: Diff) -> list[str]:
    """The diff as plain lines (rich markup for the headings), for the CLI and `validate`."""
    m = markup  # every value below comes from a run directory: shown, never markup
    lines = [f"diff {m(d.run_a)} -> {m(d.run_b)}: verdict {m(d.verdict[0])} -> {m(d.verdict[1])}"]
    for title, changes in (
        ("versions", d.versions),
        ("settings", d.settings),
        ("hardware", d.hardware),
        ("certified matrix", d.matrix),
    ):
        if changes:
            lines.append(f"[bold]{title} changed[/]")
            lines += [
                f"  {m(c.scope)} {m(c.key)}: {m(c.before or '-')} -> {m(c.after or '-')}"
                for c in changes
            ]
    if d.checks:
        lines.append("[bold]checks flipped[/]")
        lines += [
            f"  {f.kind:9} {m(f.node)} {m(f.check)}: {m(f.before or '-')} -> {m(f.after or '-')}"
            for f in d.checks
        ]
    moved = [m for m in d.figures if m.moved]
    lines.append(f"[bold]figures[/] {len(d.figures)} compared, {len(moved)} moved beyond spread")
    lines += [
        f"  {'worse' if f.worse else 'better'} {m(f.figure)}: {f.before:,.2f} -> {f.after:,.2f}"
        f" ({f.change:+.1%}; threshold {f.threshold:.1%}, {m(f.spread)})"
        for f in moved
    ]
    if d.named:
        lines.append("[bold]named by the verdict since the run before[/]")
        lines += [f"  {m(text)}" for text in d.named]
    if d.regressions:
        lines.append(f"[bold red]REGRESSION[/] ({len(d.regressions)})")
        lines += [f"  - {m(r)}" for r in d.regressions]
    else:
        lines.append("[green]no regression[/]")
    return lines
