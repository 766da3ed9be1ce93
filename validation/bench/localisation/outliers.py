"""Judge each node's, GPU's and link's figure, and name the part that holds the rack back.

Why: an average hides the one slow cable; a verdict that says FAIL without naming it
sends a team back to ib_write_bw by hand. SuperBench's diagnosis rules and DCGM's
per-GPU tests judge every figure twice, and so does this module:
- against its absolute threshold: `fraction x line rate` (the link's line rate as
  validation.bench.links finds it; a GPU's copies against its PCIe link's rate);
- against the rack's own median: `value < median_fraction x median` is slow. The MAD
  (median absolute deviation) is written beside it (x 1.4826 estimates sigma) so a reader
  sees how much the rack's figures spread; the rule is
  the fraction, which stays meaningful when the rack is small or very even (MAD ~ 0).
Both rules, with their numbers, go into the record (`Rule.to_dict`).

Attribution of slow links: a node whose every measured link is slow (two links or more)
is named itself, as the likely fault is its NIC, its PCIe slot or its cable to the switch;
a slow link between two nodes that are not named is named as that link. The links'
reference is the median over nodes of each node's best link, so one slow node (all its
links slow: 3 of 6 pairs at four nodes) cannot drag the reference down with it.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

MAD_SCALE = 1.4826  # MAD x this estimates sigma for normal data


@dataclass(frozen=True)
class Rule:
    """How one metric is judged. `absolute_min` None: no absolute threshold known."""

    metric: str
    unit: str
    median_fraction: float
    absolute_min: float | None = None
    absolute_source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def expected(self, reference: float | None) -> str:
        parts = []
        if reference is not None:
            parts.append(f">= {self.median_fraction:g}x rack median {_fmt(reference)} {self.unit}")
        if self.absolute_min is not None:
            parts.append(f">= {_fmt(self.absolute_min)} {self.unit} ({self.absolute_source})")
        return " and ".join(parts) or "a reference"


@dataclass
class Finding:
    """One named culprit: what it is, the figure, and the rule it broke."""

    kind: str  # link | node | gpu | compute | rank
    target: str  # what goes in the check id's brackets
    metric: str
    value: float
    unit: str
    reference: float | None
    observed: str
    expected: str
    nodes: list[str] = field(default_factory=list)
    pci: str | None = None

    @property
    def check_id(self) -> str:
        return f"bench.{self.kind}[{self.target}]"

    @property
    def ratio(self) -> float | None:
        return self.value / self.reference if self.reference else None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["id"] = self.check_id
        out["ratio"] = self.ratio
        out["message"] = f"{self.check_id}: {self.observed}"
        return out


def _fmt(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def mad(values: Iterable[float], centre: float) -> float:
    """Median absolute deviation of `values` around `centre`."""
    return statistics.median(abs(v - centre) for v in values)


def spread(values: list[float]) -> dict[str, float]:
    """What the record shows beside a reference: n, median, MAD and the range."""
    mid = statistics.median(values)
    return {
        "n": len(values),
        "median": mid,
        "mad": mad(values, mid),
        "min": min(values),
        "max": max(values),
    }


def slow(value: float, reference: float | None, rule: Rule) -> list[str]:
    """Which of the two rules `value` breaks (empty: none)."""
    out = []
    if reference is not None and value < rule.median_fraction * reference:
        out.append("median")
    if rule.absolute_min is not None and value < rule.absolute_min:
        out.append("absolute")
    return out


def describe(value: float, reference: float | None, rule: Rule, broke: list[str]) -> str:
    """`2.1 Gb/s, 0.41x rack median 5.1 Gb/s` (and the absolute threshold when it broke)."""
    text = f"{_fmt(value)} {rule.unit}"
    if reference:
        text += f", {value / reference:.2f}x rack median {_fmt(reference)} {rule.unit}"
    if "absolute" in broke and rule.absolute_min is not None:
        text += f", below {_fmt(rule.absolute_min)} {rule.unit} ({rule.absolute_source})"
    return text


# -- links --------------------------------------------------------------------------------------
def link_reference(figures: Mapping[tuple[str, str], float]) -> float | None:
    """The median over nodes of each node's best link (robust to one slow node)."""
    best: dict[str, float] = {}
    for (a, b), v in figures.items():
        for n in (a, b):
            best[n] = max(best.get(n, v), v)
    return statistics.median(best.values()) if best else None


def judge_links(
    figures: Mapping[tuple[str, str], float], rule: Rule
) -> tuple[list[Finding], dict[str, Any]]:
    """Findings for slow links (and the nodes whose every link is slow), and the numbers."""
    ref = link_reference(figures)
    if ref is None:
        return [], {"reference": None}
    broke = {pair: slow(v, ref, rule) for pair, v in figures.items()}
    slow_pairs = {p for p, why in broke.items() if why}
    per_node: dict[str, list[tuple[str, str]]] = {}
    for pair in figures:
        for n in pair:
            per_node.setdefault(n, []).append(pair)
    named = sorted(
        n
        for n, pairs in per_node.items()
        if len(pairs) >= 2 and all(p in slow_pairs for p in pairs)
    )
    if named and len(named) == len(per_node):
        named = []  # every node "slow": the rack, not a node; its links are named below
    findings: list[Finding] = []
    for n in named:
        values = [figures[p] for p in per_node[n]]
        mid = statistics.median(values)
        findings.append(
            Finding(
                "node",
                n,
                rule.metric,
                mid,
                rule.unit,
                ref,
                f"every link slow: median {describe(mid, ref, rule, slow(mid, ref, rule))}"
                f" over {len(values)} links (its NIC, its PCIe slot or its cable to the switch)",
                rule.expected(ref),
                nodes=[n],
            )
        )
    for a, b in sorted(slow_pairs):
        if a in named or b in named:
            continue
        v = figures[(a, b)]
        findings.append(
            Finding(
                "link",
                f"{a}<->{b}",
                rule.metric,
                v,
                rule.unit,
                ref,
                describe(v, ref, rule, broke[(a, b)]),
                rule.expected(ref),
                nodes=[a, b],
            )
        )
    numbers = {**spread(list(figures.values())), "reference": ref,
               "reference_is": "median over nodes of each node's best link",
               "slow": [f"{a}<->{b}" for a, b in sorted(slow_pairs)]}  # fmt: skip
    return findings, numbers


# -- units: GPUs (or a node's CPU) --------------------------------------------------------------
@dataclass(frozen=True)
class Unit:
    """One figure of one GPU (or CPU) of one node."""

    node: str
    unit: str  # GPU0.. or cpu
    pci: str | None
    value: float


def judge_units(units: list[Unit], rule: Rule, kind: str) -> tuple[list[Finding], dict[str, Any]]:
    """Slow units against the median of the same metric over the rack's units. A GPU
    names node and PCI address (`bench.gpu[node 0000:17:00.0]`); a rank names its node
    and rank (`bench.rank[node rank3]`); otherwise the node (`bench.<kind>[node]`), e.g.
    a CPU's GEMM names the node's compute."""
    if not units:
        return [], {"reference": None}
    ref = statistics.median(u.value for u in units)
    findings = []
    for u in units:
        broke = slow(u.value, ref, rule)
        if not broke:
            continue
        if kind == "rank":
            k, target = "rank", f"{u.node} {u.unit}"
        elif u.unit.startswith("GPU"):
            k, target = "gpu", f"{u.node} {u.pci or u.unit}"
        else:
            k, target = kind, u.node
        what = f"{u.unit} {u.pci}" if u.pci else u.unit
        findings.append(
            Finding(
                k,
                target,
                rule.metric,
                u.value,
                rule.unit,
                ref,
                f"{what} {rule.metric} {describe(u.value, ref, rule, broke)}",
                rule.expected(ref),
                nodes=[u.node],
                pci=u.pci,
            )
        )
    return findings, {**spread([u.value for u in units]), "reference": ref}
