"""Which node pairs measure their link at the same time: rounds of disjoint pairs.

Why: a rack bring-up tests every cable, and a pair's test only means something when
neither node is busy with another pair. Intel IMB's `-multi` and SuperBench's pair-wise
pattern run N/2 disjoint pairs at once; the circle method (round-robin tournament) covers
every pair of n nodes in n-1 such rounds (n even; one node sits out each round when n is
odd), so the wall time is rounds x one pair's time, not pairs x it.

Patterns (`--pattern`):
- round-robin (default): every pair, n-1 rounds of n/2 pairs. At 16 nodes, 15 rounds find a
  single bad cable between any two nodes.
- ring: each node with the next, 2 rounds (3 when n is odd): 2n links, fast, and a node
  whose both ring links are slow is still named; a bad cable between non-neighbours is not
  seen.
- all-pairs: every pair alone, one per round (ClusterKit's serial mode): n(n-1)/2 rounds,
  for telling a pair's own figure from interference.
- k-batch: the round-robin's pairs, at most k at once (SuperBench's k-batch), for fabrics
  that cannot carry n/2 pairs at line rate.

    >>> rounds("round-robin", ["a", "b", "c", "d"])
    [[('a', 'd'), ('b', 'c')], [('a', 'c'), ('d', 'b')], [('a', 'b'), ('c', 'd')]]
"""

from __future__ import annotations

from itertools import combinations

PATTERNS = ("round-robin", "ring", "all-pairs", "k-batch")
Pair = tuple[str, str]


def round_robin(names: list[str]) -> list[list[Pair]]:
    """The circle method: node 0 stays, the others rotate one place per round."""
    if len(names) < 2:
        return []
    ring: list[str | None] = list(names) + ([None] if len(names) % 2 else [])
    n = len(ring)
    out: list[list[Pair]] = []
    for _ in range(n - 1):
        pairs = [(ring[i], ring[n - 1 - i]) for i in range(n // 2)]
        out.append([(a, b) for a, b in pairs if a is not None and b is not None])
        ring = [ring[0], ring[-1], *ring[1:-1]]
    return out


def ring_rounds(names: list[str]) -> list[list[Pair]]:
    """Each node with the next (the last with the first), in rounds of disjoint pairs."""
    n = len(names)
    if n < 2:
        return []
    if n == 2:
        return [[(names[0], names[1])]]
    links = [(names[i], names[(i + 1) % n]) for i in range(n)]
    even, odd = links[0::2], links[1::2]
    if n % 2:  # the last link shares a node with the first: a round of its own
        return [even[:-1], odd, [even[-1]]]
    return [even, odd]


def all_pairs(names: list[str]) -> list[list[Pair]]:
    """Every pair alone, in the order itertools.combinations gives."""
    return [[p] for p in combinations(names, 2)]


def k_batch(names: list[str], k: int) -> list[list[Pair]]:
    """The round-robin's rounds cut into batches of at most k pairs."""
    if k < 1:
        raise ValueError("k-batch: k must be at least 1")
    out: list[list[Pair]] = []
    for rnd in round_robin(names):
        out += [rnd[i : i + k] for i in range(0, len(rnd), k)]
    return out


def rounds(pattern: str, names: list[str], k: int = 4) -> list[list[Pair]]:
    """The rounds of `pattern` over `names` (order kept); ValueError for an unknown one."""
    if len(set(names)) != len(names):
        raise ValueError("node names must be unique")
    if pattern == "round-robin":
        return round_robin(names)
    if pattern == "ring":
        return ring_rounds(names)
    if pattern == "all-pairs":
        return all_pairs(names)
    if pattern == "k-batch":
        return k_batch(names, k)
    raise ValueError(f"pattern {pattern!r}: choose one of {', '.join(PATTERNS)}")
