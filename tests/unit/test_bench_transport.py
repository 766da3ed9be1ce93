"""validation.bench.transport: one way to run steps on nodes (here: the local transport,
/bin/sh on this machine; the SSH and srun transports are the localisation lab tests')."""

from __future__ import annotations

from tests.support.bench_transport import A, B
from validation.bench.transport import (
    SrunTarget,
    SrunTransport,
    Step,
    node_lines,
)


def test_srun_steps_pick_each_nodes_part_and_read_labelled_output() -> None:
    t = SrunTransport(SrunTarget(partition="gpu", reservation="maint", immediate_s=30))
    (proc,) = t.procs(Step.pair(A, B, "run-client", "run-server"), barrier=True)
    assert proc.argv[:3] == ["srun", "--nodelist=a,b", "--nodes=2"]
    assert "--partition=gpu" in proc.argv and "--reservation=maint" in proc.argv
    script = proc.argv[-1]
    assert "a) run-client;;" in script and "b) run-server;;" in script
    assert proc.ready == 2 and proc.labelled
    # Slurm orders tasks by its own node list: each task names its node first
    text = "1: rackcert-node a\n0: rackcert-node b\n1: client says\n0: server says\n"
    assert node_lines(text) == {"a": ["client says"], "b": ["server says"]}


def test_the_modules_the_nodes_are_told_to_run_exist_and_ship_in_the_worker_wheel() -> None:
    """`python -m` lines the controller sends: the worker and the storage reader."""
    import importlib.util

    from rackcert.configure.worker_wheel import MODULES
    from validation.bench import launch
    from validation.bench.units import storage

    for module in (launch.WORKER[1], storage.READER):
        assert importlib.util.find_spec(module) is not None, module
        assert module.replace(".", "/") + ".py" in MODULES, module
