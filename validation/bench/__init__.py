"""Certification benchmarks: allreduce sweep, ResNet50 weak scaling, storage random reads.

Laid out by job; the parts meet only through JSON:
- `node/`: what runs on every node under torchrun, horovodrun, mpirun or srun (the worker,
  its loops, the probes); torch and the standard library only;
- `units/`: one file per benchmark on the controller (allreduce, resnet, references,
  storage, rdma, nccl_tests): how its figures become the record;
- `localisation/`: which node, GPU or link holds the rack back (stages, rules,
  confirmation, findings);
- the orchestration, where `rackcert bench` runs: `options` (what it can be told),
  `targets` (which nodes), `launch`, `slurm_launch` and `k8s` (how ranks start: steps
  handed to `transport`, the one place ssh and srun command lines are written),
  `orchestrate` (plan, run, record), `verdict` (judge), `links` (which link a figure
  crossed), `perftest` (ib_write_bw's commands, for the rdma unit and localisation).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rackcert.core.runs import RunDir
    from rackcert.core.spec_loader import LoadedSpec
    from rackcert.core.stage_records import BenchRecord
    from validation.bench.localisation.stages import LocaliseOptions
    from validation.bench.options import BenchOptions, Progress


def run(
    loaded: LoadedSpec,
    run_dir: RunDir,
    options: BenchOptions | None = None,
    *,
    progress: Progress | None = None,
    localise: LocaliseOptions | None = None,
    **fields: Any,
) -> BenchRecord:
    """The bench stage: launch, measure, judge; records bench.json and returns it typed.

    `options` (or BenchOptions' fields as keywords) say what to run; `localise` adds
    localisation after the bench (validation.bench.localisation.stages: one check per finding). With
    no known_hosts given, the rack's known_hosts (rackcert.core.known_hosts) is the one trusted. A
    verdict of FAIL or INCOMPLETE is evidence, returned in the record; a launch that fails
    raises a RackcertError after recording what was measured before it.

        >>> record = run(load_spec("inventories/lab.yaml"), run_dir, local=True, quick=True)
        >>> record.data.verdict.verdict
    """
    from validation.bench.options import BenchOptions
    from validation.bench.orchestrate import run_bench

    opts = (options or BenchOptions()).with_(**fields)
    if opts.known_hosts is None:
        from rackcert.core.known_hosts import rack_file
        from rackcert.core.runs import runs_root_of

        # the rack's pinned or enrolled host keys (a nested run's caller gives known_hosts)
        recorded = rack_file(loaded.spec, runs_root_of(run_dir))
        if recorded.is_file():
            opts.known_hosts = recorded
    record = run_bench(loaded.spec, run_dir, opts, progress or (lambda _m: None))
    if localise is None:
        return record
    from validation.bench.localisation.stages import run_into

    return run_into(loaded.spec, run_dir, opts, localise, record, progress or (lambda _m: None))
