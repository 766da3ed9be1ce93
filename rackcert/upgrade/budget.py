"""The budget: how many nodes may be out of service at once, per partition, and the waves.

Counted the way the scheduler counts it: a node is out of service when Slurm would not
start a job on it (drained by this roll, DOWN, or being upgraded). A node an operator
drained is left alone, reported, and does not count: it is neither this roll's to spend
nor its to wait for. A host's VMs go out together (their host is patched with them shut
down), so the unit the budget admits is a host and all its nodes.

`--max-unavailable` is a count (2) or a share of each partition (25%, rounded down, as
Kubernetes rounds maxUnavailable); a partition whose share rounds to 0 admits nothing.

    limit = Budget.parse("25%")
    waves = plan_waves(units, limit, partition_sizes)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from rackcert.core.errors import InputError

_BUDGET_RE = re.compile(r"^\s*(\d+)\s*(%?)\s*$")


@dataclass(frozen=True)
class Budget:
    value: int
    percent: bool = False

    @classmethod
    def parse(cls, text: str) -> Budget:
        match = _BUDGET_RE.match(str(text))
        if not match:
            raise InputError(
                f"--max-unavailable {text!r}: give a count of nodes (1) or a share (25%)"
            )
        value, percent = int(match.group(1)), bool(match.group(2))
        if value < 1 or (percent and value > 100):
            raise InputError(f"--max-unavailable {text!r}: at least 1 node (or 1%), at most 100%")
        return cls(value, percent)

    def limit(self, partition_size: int) -> int:
        """Nodes of a partition of this size that may be out at once."""
        if self.percent:
            return math.floor(partition_size * self.value / 100)
        return self.value

    def __str__(self) -> str:
        return f"{self.value}{'%' if self.percent else ''}"


@dataclass(frozen=True)
class Unit:
    """A host and the rack's nodes (VMs) on it: they go out of service together."""

    host: str
    nodes: tuple[str, ...]


def cost(unit: Unit, partitions: dict[str, tuple[str, ...]]) -> dict[str, int]:
    """Nodes the unit takes out of each partition."""
    out: dict[str, int] = {}
    for node in unit.nodes:
        for part in partitions.get(node, ()):
            out[part] = out.get(part, 0) + 1
    return out


def fits(
    unit: Unit,
    partitions: dict[str, tuple[str, ...]],
    limits: dict[str, int],
    out_now: dict[str, int],
) -> bool:
    """Whether taking `unit` out keeps every partition within its limit."""
    return all(out_now.get(p, 0) + n <= limits.get(p, 0) for p, n in cost(unit, partitions).items())


def plan_waves(
    units: list[Unit], partitions: dict[str, tuple[str, ...]], limits: dict[str, int]
) -> list[list[Unit]]:
    """Units in the given order, packed into waves no partition's limit is exceeded by.

    A wave is closed as soon as the next unit does not fit (order is kept: the operator's
    order is a promise about which nodes go first). A unit that fits no wave alone is the
    caller's to refuse (unfreeable).
    """
    waves: list[list[Unit]] = []
    current: list[Unit] = []
    used: dict[str, int] = {}
    for unit in units:
        if current and not fits(unit, partitions, limits, used):
            waves.append(current)
            current, used = [], {}
        current.append(unit)
        for part, n in cost(unit, partitions).items():
            used[part] = used.get(part, 0) + n
    if current:
        waves.append(current)
    return waves


def unfreeable(
    units: list[Unit], partitions: dict[str, tuple[str, ...]], limits: dict[str, int]
) -> list[str]:
    """One line per unit that no budget of these limits can take out, even alone."""
    lines = []
    for unit in units:
        for part, n in cost(unit, partitions).items():
            if n > limits.get(part, 0):
                lines.append(
                    f"{unit.host}: its {n} node(s) in partition {part} ({', '.join(unit.nodes)})"
                    f" go out together, and --max-unavailable allows {limits.get(part, 0)}"
                    " there; raise it, or move a VM"
                )
    return lines


def order_units(units: list[Unit], order: list[str] | None, jobs: dict[str, int]) -> list[Unit]:
    """The units in the operator's order: a node list (its hosts first, in the list's order;
    unnamed hosts after, in spec order), `least-busy` (fewest running jobs first; `jobs`
    holds each node's count), or spec order."""
    if order is None:
        return list(units)
    if order == ["least-busy"]:
        return sorted(units, key=lambda u: sum(jobs.get(n, 0) for n in u.nodes))
    known = {n for u in units for n in u.nodes}
    unknown = [n for n in order if n not in known]
    if unknown:
        raise InputError(
            f"--order names {', '.join(unknown)}, not a node of this rack"
            f" (its nodes: {', '.join(sorted(known))})"
        )
    rank = {n: i for i, n in enumerate(order)}
    return sorted(units, key=lambda u: min(rank.get(n, len(rank)) for n in u.nodes))
