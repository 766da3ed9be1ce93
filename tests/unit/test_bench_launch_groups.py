"""Which tasks of a bench point share a launch (validation.bench.orchestrate.launch_groups).

One process per configuration everywhere a figure is judged on its own; the quick bench of
CPU nodes (the demo's path check) runs its top point's sweep and ResNet50 in one launch,
because a launch across nodes costs tens of seconds of start and eager CPU work leaves no
state behind. A device not known yet (auto: the nodes say at their first launch) is never
grouped.
"""

from __future__ import annotations

import pytest

from validation.bench.options import BenchOptions, Engine
from validation.bench.orchestrate import launch_groups

CPU = Engine("horovod", "cpu", "horovod")
TASKS = ["allreduce", "resnet"]


def test_quick_bench_of_cpu_nodes_runs_the_sweep_and_the_loop_in_one_launch():
    assert launch_groups(BenchOptions(quick=True), CPU, TASKS) == [TASKS]
    assert launch_groups(BenchOptions(quick=True), CPU, ["resnet"]) == [["resnet"]]
    assert launch_groups(BenchOptions(quick=True), CPU, []) == []


@pytest.mark.parametrize(
    ("opts", "engine"),
    [
        (BenchOptions(quick=False), CPU),  # a full bench: each figure in its own process
        (BenchOptions(quick=True, local=True), CPU),  # one machine: no start across nodes
        (BenchOptions(quick=True), Engine("torch", "cuda", "nccl")),  # GPUs: compiled state
        (BenchOptions(quick=True), Engine("horovod", "auto", "horovod")),  # not known yet
    ],
    ids=["full", "local", "gpu", "device-unknown"],
)
def test_every_other_bench_keeps_one_process_per_configuration(opts, engine):
    assert launch_groups(opts, engine, [*TASKS, "naive"]) == [["allreduce"], ["resnet"], ["naive"]]
