"""Nodes that share one machine's CPUs: a slow reading the CPU gives every node on it.

Why: the lab's nodes are network namespaces on one machine, several to a CPU, and one of
that machine's vCPUs can run at half speed for seconds at a time (contention outside the
machine, not seen as steal). Each stage of the per-node probe lands each node on a CPU of
the kernel's choosing, so a node whose probe met the slow vCPU in both stages read ~0.5x
the rack's median twice and was named for compute with nothing wrong with it (seen: node3
and node4 at 85-86 GFLOP/s against 157-162, then node1 and node3 at 84 against 155-157).
The probe records the CPU its GEMM ran on (when it did not move) and the kernel's boot_id;
a slow reading that another node shares on the same CPU of the same machine, in the same
stage, is the CPU's and is not held against the node. A rack's nodes never share a
boot_id, so there nothing changes; a node that is slow on its own (a CPU quota) is named
as before.
"""

from __future__ import annotations

from typing import Any

FLAG = "cpu_shared"  # another node on the same CPU of the same machine read about the same
SAME = 1.2  # within 20 % either way


def _cpu_units(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        u
        for row in rows
        if not row.get("error")
        for u in row.get("units") or []
        if u.get("unit") == "cpu" and u.get("gemm_gflops")
    ]


def _place(unit: dict[str, Any]) -> tuple[str, int] | None:
    machine, cpu = unit.get("machine"), unit.get("cpu_id")
    return (machine, cpu) if machine and cpu is not None else None


def mark(rows: list[dict[str, Any]]) -> None:
    """Set FLAG on each CPU unit of one stage's rows: True where another node on the same
    place read about the same (within SAME either way: the CPU's speed, shared). Only a unit
    the rules find slow is affected (findings.judge sets it aside); in the lab's case the two
    on the slow vCPU read 85 and 86 against 157-162 beside them."""
    units = _cpu_units(rows)
    for u in units:
        place, mine = _place(u), u["gemm_gflops"]
        u[FLAG] = place is not None and any(
            v is not u and _place(v) == place and mine / SAME <= v["gemm_gflops"] <= mine * SAME
            for v in units
        )


def merge(unit: dict[str, Any], again: dict[str, Any]) -> None:
    """After the best of two: set aside only if both stages' readings were shared (one
    where the node read low beside a CPU-mate that read well is the node's own)."""
    if FLAG in unit or FLAG in again:
        unit[FLAG] = bool(unit.get(FLAG)) and bool(again.get(FLAG))


def set_aside(rows: list[dict[str, Any]]) -> set[str]:
    """The nodes whose CPU unit's reading is set aside (FLAG)."""
    return {
        row["node"]
        for row in rows
        if not row.get("error")
        for u in row.get("units") or []
        if u.get("unit") == "cpu" and u.get(FLAG)
    }
