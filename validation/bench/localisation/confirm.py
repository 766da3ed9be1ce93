"""Confirmation of suspects: a part the rules name is measured once more before it is named.

Why: one measurement of a link or a node on a busy machine (or a rack shared with other
jobs) can be slow for a moment that has nothing to do with the part: a receiver not
scheduled, a neighbour's burst. A bring-up team re-runs the pair by hand before it pulls
a cable; so does localisation, once:
- a link finding: that pair is measured again (its bandwidth, and its allreduce where
  the rounds ran one);
- a node named because every link of it is slow: every link of that node again;
- a finding of the per-node stage (compute, GPU, the node's allreduce, a failed probe):
  the per-node stage again on every node at once, so the node is measured under the same
  load as the first time (all nodes busy) and the rack's median means the same.
Each figure is then the best of its two (`first_*` keeps the first; a unit's second
figures are put on the first stage's scale by the ratio of the two rack medians, see
rack_scale), and the record is judged again: a part stays a finding only if its second
measurement was slow too. The pairs measured again run in rounds of disjoint pairs (as
many at once as can be), not alone, so a pair is not cleared by measuring it on an idle
fabric only; a link that is slow only with every pair of the rack loaded is still seen by
the first measurement and is cleared only if it is fine the second time as well.

The record says what was tried and what cleared (`confirm` in the localise block):
    {"first": [...], "tried": ["bench.link[n1<->n3]", ...], "cleared": ["bench.compute[n4]"],
     "rounds": [[["n1", "n3"]]], "nodes_again": true, "wall_s": 4.2}
Findings of the scaling runs' ranks are not measured again (those runs are over) and
are not in `tried`.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable
from typing import Any

from validation.bench.localisation import colocated

Pair = tuple[str, str]
LINK_METRICS = ("bandwidth", "two-node allreduce busbw")  # judge_links' rules (findings.rules)
NODE_KINDS = ("compute", "gpu", "node_allreduce")


def plan(record: dict[str, Any]) -> tuple[list[Pair], bool, list[str]]:
    """(pairs to measure again, whether the per-node stage runs again, ids tried)."""
    pairs: list[Pair] = []
    nodes_again = False
    tried: list[str] = []
    links = [(p["a"], p["b"]) for p in record.get("links") or []]
    for f in record.get("findings") or []:
        if f["kind"] == "link":
            pairs += [p for p in links if set(p) == set(f["nodes"])]
        elif f["kind"] == "node" and f["metric"] in LINK_METRICS:
            pairs += [p for p in links if f["nodes"][0] in p]
        elif f["kind"] in NODE_KINDS or f["kind"] == "node":
            nodes_again = True
        else:
            continue
        tried.append(f["id"])
    return list(dict.fromkeys(pairs)), nodes_again, tried


def pack(pairs: list[Pair]) -> list[list[Pair]]:
    """Pairs into rounds of disjoint pairs, greedily, in order."""
    rounds: list[list[Pair]] = []
    for pair in pairs:
        for rnd in rounds:
            if not any(set(pair) & set(other) for other in rnd):
                rnd.append(pair)
                break
        else:
            rounds.append([pair])
    return rounds


def merge_link(row: dict[str, Any], again: dict[str, Any]) -> None:
    """Best of two for the link's bandwidth and allreduce; the first kept as `first_*`."""
    row["first_gbps"], row["confirm_gbps"] = row.get("gbps"), again.get("gbps")
    if (again.get("gbps") or 0.0) > (row.get("gbps") or 0.0):
        for key in ("gbps", "forward_gbps", "reverse_gbps", "latency_us", "rtt_min_us"):
            if key in again:
                row[key] = again[key]
        if row.get("error"):  # the first try's reason stays in the record beside the figure
            row["first_error"] = row["error"]
        row["error"] = again.get("error")
    first, second = row.get("allreduce"), again.get("allreduce")
    if second is not None:
        row["first_allreduce"] = first
        if _busbw(second) > _busbw(first):
            row["allreduce"] = second


def _busbw(block: dict[str, Any] | None) -> float:
    if not block or block.get("error"):
        return 0.0
    return float(block.get("busbw_gb_s") or 0.0)


def _kind(unit: dict[str, Any]) -> str:
    """The unit's kind, cpu or gpu: the units whose figures the rules compare together."""
    return "cpu" if unit.get("unit") == "cpu" else "gpu"


def _figures(rows: list[dict[str, Any]]) -> dict[tuple[str, str], list[float]]:
    """Every unit's figure by (kind, metric)."""
    out: dict[tuple[str, str], list[float]] = {}
    for row in rows:
        if row.get("error"):
            continue
        for u in row.get("units") or []:
            for key, value in u.items():
                if key.endswith(("_gflops", "_gb_s")) and isinstance(value, int | float):
                    out.setdefault((_kind(u), key), []).append(float(value))
    return out


def rack_scale(
    first: list[dict[str, Any]], again: list[dict[str, Any]]
) -> dict[tuple[str, str], float]:
    """Per (kind, metric): the first stage's rack median over the second's.

    The rules judge a unit against the rack's median, so each stage's figures mean
    something only beside that stage's median. Between the two stages the whole machine can
    change speed: seen in the lab, a clean run whose first stage read 130-150 GFLOP/s on
    three nodes and 96 on one, and whose second read 87-90 on all four (best of two in
    absolute figures kept 96 against a median of 139: named). The second stage's figures
    are put on the first's scale before the best of two is taken."""
    one, two = _figures(first), _figures(again)
    scale: dict[tuple[str, str], float] = {}
    for key, values in one.items():
        if key in two and statistics.median(two[key]) > 0 and statistics.median(values) > 0:
            scale[key] = statistics.median(values) / statistics.median(two[key])
    return scale


def merge_node(
    row: dict[str, Any], again: dict[str, Any], scale: dict[tuple[str, str], float] | None = None
) -> None:
    """Best of two per unit and metric (the second on the first's scale: rack_scale), and
    for the node's allreduce; a failed first probe is replaced by a second that answered."""
    if row.get("error") and not again.get("error"):
        row.update({**again, "first_error": row["error"]})
        return
    if again.get("error"):
        return
    units = {u["unit"]: u for u in again.get("units") or []}
    for u in row.get("units") or []:
        other = units.get(u["unit"]) or {}
        colocated.merge(u, other)
        for key, value in other.items():
            if key.endswith(("_gflops", "_gb_s")) and isinstance(value, int | float):
                u.setdefault("first", {})[key] = u.get(key)
                u.setdefault("again", {})[key] = value
                scaled = value * (scale or {}).get((_kind(u), key), 1.0)
                u[key] = max(scaled, u.get(key) or 0.0)
    ar, ar2 = row.get("allreduce"), again.get("allreduce")
    if ar and ar2 and (ar2.get("busbw_gb_s") or 0.0) > (ar.get("busbw_gb_s") or 0.0):
        row["allreduce"] = {**ar2, "first_busbw_gb_s": ar.get("busbw_gb_s")}


def confirm(
    record: dict[str, Any],
    measure_links: Callable[[list[list[Pair]]], list[dict[str, Any]]],
    measure_nodes: Callable[[], list[dict[str, Any]]],
    judge: Callable[[dict[str, Any]], list[dict[str, Any]]],
    progress: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    """Measure the record's suspects once more, keep each figure's best of two, judge
    again: a new record (`record` is left as the first measurement wrote it), whose
    `confirm` says what was tried and what cleared."""
    record = copy.deepcopy(record)
    pairs, nodes_again, tried = plan(record)
    t0 = time.monotonic()
    scale: dict[tuple[str, str], float] = {}
    rounds = pack(pairs)
    if rounds:
        progress(f"  confirm: {len(pairs)} link(s) again in {len(rounds)} round(s)")
        rows = {(r["a"], r["b"]): r for r in record["links"]}
        for again in measure_links(rounds):
            merge_link(rows[(again["a"], again["b"])], again)
    if nodes_again:
        progress("  confirm: the per-node stage again")
        second = measure_nodes()
        colocated.mark(second)
        scale = rack_scale(record["nodes"], second)
        by_node = {n["node"]: n for n in second}
        for row in record["nodes"]:
            if row["node"] in by_node:
                merge_node(row, by_node[row["node"]], scale)
    before = {f["id"] for f in record.get("findings") or []}
    record["findings"] = judge(record)
    after = {f["id"] for f in record["findings"]}
    record["confirm"] = {
        "first": sorted(before),  # the findings before anything was measured again
        "tried": tried,
        "cleared": [i for i in tried if i not in after],
        "rounds": [[list(p) for p in r] for r in rounds],
        "nodes_again": nodes_again,
        # per "kind metric": the first stage's rack median over the second's (rack_scale)
        "node_scale": {f"{k} {m}": round(v, 4) for (k, m), v in scale.items()},
        "new": sorted(after - before),  # named only after the figures moved (not measured again)
        "wall_s": time.monotonic() - t0,
    }
    return record
