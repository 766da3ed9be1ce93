"""Read bench.json's `localisation` part: per-node and per-GPU figures, per-link figures, the
outlier rule, and the findings that name a culprit.

Why one reader: the report (per-node table, link heat map, diff) and `bench --drain` all read
the part bench writes, and its shape is settled elsewhere (validation/bench's localisation
stage). Everything that reads it goes through `read_localisation`, so a change of shape
touches this module only. Names come from nodes and the spec: they are untrusted, kept to
`CAP` characters here and shown with markup off wherever they go.

The shape read is bench.json's `data.localise` (schema 1, written by
validation/bench/localisation/stages.py, whose docstring is its reference); anything else is
left out,
never an error. What this module takes from it:

    "localise": {
      "nodes_measured": ["n1", ...],
      "nodes": [{"node": "n1", "units": [{"unit": "cpu", "pci": null, "gemm_gflops": 9.1,
                 "memcpy_gb_s": 4.2}, {"unit": "GPU0", "pci": "0000:17:00.0", ...}],
                 "allreduce": {"busbw_gb_s": ...}}],
      "links": [{"a": "n1", "b": "n2", "gbps": 0.194, "latency_us": null}],
      "rules": {"link": {"median_fraction": 0.7, ...}, ...},
      "findings": [{"id": "bench.link[n2<->n5]", "kind": "link", "nodes": ["n2", "n5"],
                    "pci": null, "metric": "bandwidth", "value": 0.08, "reference": 0.194,
                    "message": "bench.link[n2<->n5]: 0.08 Gb/s, 0.41x rack median ..."}]
    }

A unit with a PCI address is a GPU (its own row); the others (the lab's `cpu`) and the
node's own allreduce are the node's figures. Finding kinds: link (two nodes); node, gpu,
compute, node_allreduce and rank name one node. (A draft shape, `localisation` with
per-node `figures` and `gpus`, is read too.)

    loc = read_localisation(bench_json["data"])   # reads data["localise"]
    loc.link_matrix()        # (names, n x n Gb/s or None), for the heat map
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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


def _first(item: dict[str, Any], *keys: str) -> Any:
    """The first key present (the stage names it `id`/`metric`/`reference`/`pci`; the older
    draft `check`/`figure`/`median`/`gpu`): one place for the shape to settle."""
    return next((item[k] for k in keys if item.get(k) is not None), "")


def _finding(item: dict[str, Any]) -> Finding | None:
    kind = str(item.get("kind", ""))
    nodes = item.get("nodes")
    if not nodes and item.get("node") is not None:
        nodes = [item["node"]]
    if kind not in KINDS or not isinstance(nodes, list) or not nodes:
        return None
    return Finding(
        kind=kind,
        nodes=tuple(_name(n) for n in nodes[:2]),
        check=_name(_first(item, "id", "check")),
        message=cap(strip_controls(str(item.get("message", ""))), 300),
        figure=_name(_first(item, "metric", "figure")),
        value=_number(item.get("value")),
        median=_number(_first(item, "reference", "median")),
        gpu=_name(_first(item, "pci", "gpu")),
    )


def _node(item: dict[str, Any]) -> NodeFigures:
    """One node's own figures and its GPUs', from its probe units (or the draft's keys)."""
    figures = _figures(item.get("figures"))
    gpus = [
        (_name(g.get("pci", "?")), _figures(g.get("figures")))
        for g in item.get("gpus") or []
        if isinstance(g, dict)
    ]
    for unit in item.get("units") or []:
        if not isinstance(unit, dict):
            continue
        values = _figures({k: v for k, v in unit.items() if k not in _UNIT_KEYS})
        if unit.get("pci"):
            gpus.append((_name(unit["pci"]), values))
        else:
            figures |= values
    allreduce = item.get("allreduce")
    if isinstance(allreduce, dict) and _number(allreduce.get("busbw_gb_s")) is not None:
        figures["allreduce_busbw_gb_s"] = _number(allreduce["busbw_gb_s"]) or 0.0
    return NodeFigures(_name(item["node"]), figures, tuple(gpus))


def read_localisation(bench: dict[str, Any] | None) -> Localisation | None:
    """The localisation part of bench.json's data (or of run.json's bench), None without one."""
    bench = bench or {}
    part = bench.get("localise", bench.get("localisation"))
    if not isinstance(part, dict):
        return None
    rule = part.get("rules", part.get("rule"))
    loc = Localisation(rule=rule if isinstance(rule, dict) else {})
    for item in part.get("nodes") or []:
        if isinstance(item, dict) and item.get("node") is not None:
            loc.nodes.append(_node(item))
    for item in part.get("links") or []:
        if isinstance(item, dict) and item.get("a") is not None and item.get("b") is not None:
            a, b = _name(item["a"]), _name(item["b"])
            if a != b:
                loc.links.append(
                    LinkFigure(a, b, _number(item.get("gbps")), _number(item.get("latency_us")))
                )
    for item in part.get("findings") or []:
        finding = _finding(item) if isinstance(item, dict) else None
        if finding is not None:
            loc.findings.append(finding)
    measured = part.get("nodes_measured")
    if isinstance(measured, list):
        loc.order = [_name(n) for n in measured]
    return loc
