"""The burn-in's allreduce loops judged: a node's own loop on CPUs (Gloo) is recorded, not
judged; on GPUs (NCCL) and across the rack its slow intervals are findings."""

from __future__ import annotations

from typing import Any

from validation.bench.burnin.judge import Rules, judge_loops
from validation.bench.burnin.stage import BurninOptions, _soak_args

# a clean lab node's loop on a busy machine (seen): two of its intervals below 0.7x
SAGGING = [0.246, 0.28, *[0.389] * 30]


def loop(name: str, nodes: list[str], backend: str) -> dict[str, Any]:
    return {"name": name, "nodes": nodes, "backend": backend, "interval_s": 5.0,
            "busbw_gb_s": SAGGING, "starts": [5.0 * i for i in range(len(SAGGING))]}  # fmt: skip


def test_a_node_loop_on_cpus_is_recorded_and_not_judged() -> None:
    loops = [loop("node n1", ["n1"], "gloo"), loop("node n2", ["n2"], "nccl"),
             loop("rack", ["n1", "n2"], "gloo")]  # fmt: skip
    found = judge_loops(loops, Rules())
    assert [f["part"] for f in found] == ["node n2", "rack"], found
    judged = judge_loops(loops, Rules(judge_cpu_rate=True))
    assert [f["part"] for f in judged] == ["node n1", "node n2", "rack"], judged


def test_the_loop_is_told_the_cpu_size_for_a_node_without_gpus() -> None:
    """The lab's template names two GPUs it has not: the node picks the CPU size."""
    args = _soak_args(BurninOptions(gpus_per_node=2))
    assert args[args.index("--size-bytes") + 1] == str(256 << 20)
    assert args[args.index("--cpu-size-bytes") + 1] == str(1 << 20)
