"""Which peers each node's ssh.peers check reaches: a mesh that grows with n, not n^2.

The full mesh is n x (n-1) SSH logins (65,280 at 256 nodes). By default each node
checks its two ring neighbours (spec order, wrapping) and `k` more peers, so a run
costs n x (2 + k) logins. The `k` are the peers this node has gone longest without
checking (never checked first), ties broken by a generator seeded from the run id:
the choice is a pure function of (nodes, run id, k, history), pairs rotate between
runs, and coverage accumulates. Every ordered pair is checked within
ceil((n - 3) / k) consecutive runs (each run takes the k stalest of the n - 3
non-neighbours), and stays within that age from then on.

The history is one small document per run (peers.json in the run directory): for
each node, the round in which it last checked each peer. `--peers all` checks the
full mesh and records it the same way.

    >>> plan = choose(["a", "b", "c", "d", "e"], "20261203T101500Z", k=1, history=None)
    >>> plan.chosen["a"][:2], len(plan.chosen["a"])
    (['e', 'b'], 3)
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ALL = "all"
DEFAULT_K = 2
HISTORY_FILE = "peers.json"


@dataclass
class History:
    """What earlier runs checked: round numbers, and per node the round each peer was last
    checked in."""

    round: int = 0
    last_seen: dict[str, dict[str, int]] = field(default_factory=dict)

    def since(self, node: str, peer: str, now: int) -> int | None:
        """Runs since `node` last checked `peer` (None: never)."""
        seen = self.last_seen.get(node, {}).get(peer)
        return None if seen is None else now - seen

    def to_dict(self) -> dict[str, Any]:
        return {"round": self.round, "last_seen": self.last_seen}

    @classmethod
    def from_dict(cls, data: Any) -> History:
        """A history document as written by `to_dict`; anything else is no history."""
        if not isinstance(data, dict) or not isinstance(data.get("round"), int):
            return cls()
        seen = data.get("last_seen")
        if not isinstance(seen, dict):
            return cls()
        clean = {
            str(n): {str(p): int(r) for p, r in peers.items() if isinstance(r, int)}
            for n, peers in seen.items()
            if isinstance(peers, dict)
        }
        return cls(data["round"], clean)


@dataclass
class Plan:
    """One run's choice: per node the peers it checks, and how stale each pair was."""

    mode: str
    k: int
    seed: str
    round: int
    nodes: list[str]
    chosen: dict[str, list[str]]
    since: dict[tuple[str, str], int | None]

    def pairs(self) -> list[tuple[str, str, int | None]]:
        return [(n, p, self.since[(n, p)]) for n, peers in self.chosen.items() for p in peers]


def seed_of(run_id: str) -> str:
    """The run's seed: a digest of its id, so the same run always chooses the same peers."""
    return hashlib.sha256(f"rackcert-peers:{run_id}".encode()).hexdigest()[:16]


def ring(nodes: list[str], node: str) -> list[str]:
    """The node's two neighbours in spec order, wrapping (one when n is 2)."""
    i, n = nodes.index(node), len(nodes)
    out = [nodes[(i - 1) % n], nodes[(i + 1) % n]]
    return [p for j, p in enumerate(out) if p != node and p not in out[:j]]


def choose(
    nodes: list[str],
    run_id: str,
    *,
    k: int | str = DEFAULT_K,
    history: History | None = None,
    sources: list[str] | None = None,
) -> Plan:
    """The peers each source node (default: every node) checks in this run."""
    history = history or History()
    now = history.round + 1
    seed = seed_of(run_id)
    chosen: dict[str, list[str]] = {}
    for node in sources or nodes:
        others = [p for p in nodes if p != node]
        if k == ALL:
            chosen[node] = others
            continue
        near = ring(nodes, node)
        rest = [p for p in others if p not in near]
        rng = random.Random(f"{seed}:{node}")
        ties = {p: rng.random() for p in rest}
        age: dict[str, float] = {}
        for p in rest:
            last = history.since(node, p, now)
            age[p] = math.inf if last is None else float(last)
        rest.sort(key=lambda p: (-age[p], ties[p]))
        chosen[node] = near + rest[: int(k)]
    since = {(n, p): history.since(n, p, now) for n, peers in chosen.items() for p in peers}
    mode = ALL if k == ALL else "ring+random"
    return Plan(mode, 0 if k == ALL else int(k), seed, now, list(nodes), chosen, since)


def record(history: History | None, plan: Plan) -> History:
    """The history after this run: every chosen pair seen in this round."""
    old = history or History()
    seen = {n: dict(p) for n, p in old.last_seen.items() if n in plan.nodes}
    for node, peers in plan.chosen.items():
        mine = seen.setdefault(node, {})
        for peer in peers:
            mine[peer] = plan.round
    return History(plan.round, seen)


def coverage(after: History, nodes: list[str]) -> dict[str, int | None]:
    """How much of the full mesh the history covers: ordered pairs of these nodes checked
    at least once, and the age of the stalest one (None while some pair was never checked)."""
    total = len(nodes) * (len(nodes) - 1)
    ages = [
        after.round - r
        for n in nodes
        for p, r in after.last_seen.get(n, {}).items()
        if p in nodes and p != n
    ]
    covered = len(ages)
    return {
        "mesh_pairs": total,
        "covered": covered,
        "oldest": max(ages) if ages and covered == total else None,
    }


def bound(n: int, k: int) -> int:
    """Runs within which every ordered pair of n nodes is checked with k extra peers."""
    return max(1, math.ceil(max(0, n - 3) / max(1, k)))


def parse_k(text: str | None) -> int | str:
    """`--peers`: 'all', or the number of peers beyond the ring neighbours."""
    from rackcert.core.errors import InputError

    if text is None:
        return DEFAULT_K
    if text == ALL:
        return ALL
    if text.isdigit():
        return int(text)
    raise InputError(f"--peers {text}: give 'all' or a number of extra peers (default 2)")


def previous(rack_dir: Path, current: Path) -> History | None:
    """The newest earlier run's history of this rack (None when there is none)."""
    runs = sorted(p for p in rack_dir.iterdir() if p.is_dir() and p.name < current.name)
    for run in reversed(runs):
        path = run / HISTORY_FILE
        if path.is_file():
            try:
                return History.from_dict(json.loads(path.read_text()))
            except (OSError, ValueError):
                return None
    return None
