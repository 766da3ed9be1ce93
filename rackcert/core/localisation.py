"""Read bench.json's `localise` part as the report and `bench --drain` see it: per-node and
per-GPU figures, per-link figures, the outlier rules, and the findings that name a culprit.

Why one reader: the report (per-node table, link heat map, diff) and `bench --drain` all read
the part bench writes. Its shape is the typed `LocaliseRecord` (rackcert.core.stage_records,
schema 1: a record written before that model loads through it); this module turns it into
the views those readers need. Names come from nodes and the spec: they are untrusted, kept
to `NAME_CAP` characters here and shown with markup off wherever they go. A probe's own
figures (a unit's keys beside `unit` and `pci`) are kept when they are finite numbers.

A unit with a PCI address is a GPU (its own row); the others (the lab's `cpu`) and the
node's own allreduce are the node's figures. Finding kinds: link (two nodes); node, gpu,
compute, node_allreduce and rank name one node.

    loc = read_localisation(record.data.localise)   # a BenchData's LocaliseRecord, or None
    loc.link_matrix()        # (names, n x n Gb/s or None), for the heat map
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rackcert.core.stage_records import LocaliseFinding, LocaliseRecord, NodeRow
from rackcert.core.untrusted import cap, strip_controls

NAME_CAP = 120  # a node name, PCI address or figure name as shown
# What a finding names: a link (two nodes), or one node: the node itself (all its links slow),
# one of its GPUs, its compute, or one of its ranks in a scaling run.
KINDS = ("link", "node", "gpu", "compute", "node_allreduce", "rank")
NODE_KINDS = KINDS[1:]
_UNIT_KEYS = ("unit", "pci")


def _name(value: Any) -> str:
    return cap(strip_controls(str(value)), NAME_CAP)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if number == number and abs(number) != float("inf") else None


def _figures(value: Any) -> dict[str, float]:
    if not isinstance(value, dict):
        return {}
    out = {}
    for key, item in value.items():
        number = _number(item)
        if number is not None:
            out[_name(key)] = number
    return out


@dataclass(frozen=True)
class Finding:
    """One culprit the verdict names: a node, one of its GPUs, or the link between two nodes."""

    kind: str  # link | node | gpu | compute | node_allreduce | rank
    nodes: tuple[str, ...]
    check: str
    message: str
    figure: str = ""
    value: float | None = None
    median: float | None = None
    gpu: str = ""

    @property
    def subject(self) -> str:
        """What it names, as the report and the drain reason show it."""
        if self.kind == "link" and len(self.nodes) == 2:
            return f"{self.nodes[0]}<->{self.nodes[1]}"
        if self.kind == "gpu":
            return f"{self.nodes[0] if self.nodes else '?'} {self.gpu}".strip()
        return self.nodes[0] if self.nodes else "?"


@dataclass(frozen=True)
class NodeFigures:
    node: str
    figures: dict[str, float]
    gpus: tuple[tuple[str, dict[str, float]], ...] = ()


@dataclass(frozen=True)
class LinkFigure:
    a: str
    b: str
    gbps: float | None
    latency_us: float | None = None


@dataclass
class Localisation:
    nodes: list[NodeFigures] = field(default_factory=list)
    links: list[LinkFigure] = field(default_factory=list)
    rule: dict[str, Any] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    order: list[str] = field(default_factory=list)  # nodes_measured, as the stage gave them

    def names(self) -> list[str]:
        """Every node, in the order the record gives them (measured, nodes, then links')."""
        out: list[str] = []
        ends = [x for link in self.links for x in (link.a, link.b)]
        for name in self.order + [n.node for n in self.nodes] + ends:
            if name not in out:
                out.append(name)
        return out

    def link_matrix(self) -> tuple[list[str], list[list[float | None]]]:
        """n x n Gb/s, symmetric (a link measured once fills both cells; measured both ways,
        the lower figure, as the slower direction holds a ring back); None: not measured."""
        names = self.names()
        index = {name: i for i, name in enumerate(names)}
        matrix: list[list[float | None]] = [[None] * len(names) for _ in names]
        for link in self.links:
            if link.gbps is None:
                continue
            i, j = index[link.a], index[link.b]
            for x, y in ((i, j), (j, i)):
                old = matrix[x][y]
                matrix[x][y] = link.gbps if old is None else min(old, link.gbps)
        return names, matrix

    def named_links(self) -> set[frozenset[str]]:
        return {frozenset(f.nodes) for f in self.findings if f.kind == "link"}

    def named_nodes(self) -> dict[str, list[Finding]]:
        """Nodes a node or GPU finding names (a link finding names a cable, not a node)."""
        out: dict[str, list[Finding]] = {}
        for finding in self.findings:
            if finding.kind in NODE_KINDS and finding.nodes:
                out.setdefault(finding.nodes[0], []).append(finding)
        return out


def _finding(item: LocaliseFinding) -> Finding | None:
    if item.kind not in KINDS or not item.nodes:
        return None
    return Finding(
        kind=item.kind,
        nodes=tuple(_name(n) for n in item.nodes[:2]),
        check=_name(item.id),
        message=cap(strip_controls(item.message), 300),
        figure=_name(item.metric),
        value=_number(item.value),
        median=_number(item.reference),
        gpu=_name(item.pci or ""),
    )


def _node(row: NodeRow) -> NodeFigures:
    """One node's own figures and its GPUs', from its probe units."""
    figures: dict[str, float] = {}
    gpus: list[tuple[str, dict[str, float]]] = []
    for unit in row.units:
        values = _figures({k: v for k, v in unit.items() if k not in _UNIT_KEYS})
        if unit.get("pci"):
            gpus.append((_name(unit["pci"]), values))
        else:
            figures |= values
    busbw = _number((row.allreduce or {}).get("busbw_gb_s"))
    if busbw is not None:
        figures["allreduce_busbw_gb_s"] = busbw
    return NodeFigures(_name(row.node), figures, tuple(gpus))


def read_localisation(part: LocaliseRecord | None) -> Localisation | None:
    """The views of bench.json's `localise` part (`BenchData.localise`), None without one."""
    if part is None:
        return None
    loc = Localisation(rule=dict(part.rules))
    loc.nodes = [_node(row) for row in part.nodes]
    for link in part.links:
        a, b = _name(link.a), _name(link.b)
        if a != b:
            loc.links.append(LinkFigure(a, b, _number(link.gbps), _number(link.latency_us)))
    loc.findings = [f for f in (_finding(item) for item in part.findings) if f is not None]
    loc.order = [_name(n) for n in part.nodes_measured]
    return loc
