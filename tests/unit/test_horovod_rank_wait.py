"""Issue 56: how a Horovod rank waits for its allreduce, decided from where the ranks run and
kept in the record. Horovod 0.28's hvd.synchronize waits in a sched_yield loop; where more
ranks share one machine than it has cores (the lab: 4 CPU ranks on 2 cores), the bench's
ranks poll the handle with naps instead, and the record says which wait ran."""

from __future__ import annotations

import pytest

from rackcert.core.results import AllreduceResult
from rackcert.core.spec import Certification
from validation.bench.node import allreduce_loop
from validation.bench.node.comm import POLL_NAP_S, machine_id, ranks_over_cores
from validation.bench.options import Engine
from validation.bench.units.allreduce import allreduce_result

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("machines", "cores", "over"),
    [
        (["a", "a", "a", "a"], 2, 4),  # the lab: both nodes' ranks on one 2-core machine
        (["a", "a", "b", "b"], 2, None),  # a rack: 2 ranks per 2-core node, each its own
        (["a", "a", "a", "a"], 4, None),  # as many cores as ranks
        (["a", "a", "a", "b"], 2, 3),  # three here, one elsewhere: still more than 2 cores
        (["a"], 1, None),
    ],
)
def test_ranks_are_counted_per_machine_against_its_cores(machines, cores, over) -> None:
    assert ranks_over_cores(machines, "a", cores) == over


def test_the_machine_is_the_running_kernel() -> None:
    # Two network namespaces of one machine read the same boot_id: the lab's nodes.
    with open("/proc/sys/kernel/random/boot_id") as f:
        assert machine_id() == f.read().strip()
    assert 0 < POLL_NAP_S <= 0.001  # a nap short beside a CPU call (10-100 ms in the lab)


def _raw(rank_wait: str | None) -> dict:
    sizes = allreduce_loop.sweep_sizes(8, 1 << 20)
    points = [{"size_bytes": s, "count": s // 4, "time_us": 20_000.0 + s / 8.3,
               "algbw_gbps": s / (20_000.0 + s / 8.3) / 1e3, "busbw_gbps": 0.01,
               "correct": True, "iters": 5} for s in sizes]  # fmt: skip
    ranks = [{"rank": r, "host": f"node{r // 2 + 1}"} for r in range(4)]
    allreduce = {"points": points, "iters": 5, "warmup": 2, "rank_wait": rank_wait}
    return {"allreduce": allreduce, "world_size": 4, "device": "cpu", "backend": "horovod",
            "ranks": ranks}  # fmt: skip


@pytest.mark.parametrize(
    "wait", ["poll every 0.5 ms (4 ranks share this machine's 2 cores; ...)", None]
)
def test_the_record_says_how_the_ranks_waited(wait) -> None:
    engine = Engine("horovod", "cpu", "horovod")
    ar = allreduce_result(_raw(wait), engine, Certification(), None, 0.1)
    assert ar.rank_wait == wait and ar.link == "nic"
    again = AllreduceResult.model_validate(ar.model_dump())  # the bench record round-trips
    assert again.rank_wait == wait
