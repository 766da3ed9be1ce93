"""Certification benchmarks: allreduce sweep, ResNet50 weak scaling, storage random reads.

Two halves that meet only through JSON:
- worker side (`worker`, `comm`, `allreduce`, `resnet`, `storage`): runs on every node
  under torchrun or horovodrun, needs only torch and the standard library;
- orchestration side (`launch`, `suite`, `k8s`, `verdict`): runs where `rackcert bench`
  runs, starts the workers through an existing engine (torchrun with a c10d rendezvous
  over SSH, horovodrun, or Kubernetes manifests), and turns their output into the
  `rackcert.core.results` models that the report reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rackcert.core.runs import RunDir
    from rackcert.core.spec_loader import LoadedSpec
    from rackcert.core.stage_records import BenchRecord
    from validation.bench.localise import LocaliseOptions
    from validation.bench.suite import BenchOptions, Progress


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
    localisation after the bench (validation.bench.localise: one check per finding). With
    no known_hosts given, the rack's known_hosts (rackcert.core.known_hosts) is the one trusted. A
    verdict of FAIL or INCOMPLETE is evidence, returned in the record; a launch that fails
    raises a RackcertError after recording what was measured before it.

        >>> record = run(load_spec("inventories/lab.yaml"), run_dir, local=True, quick=True)
        >>> record.data.verdict.verdict
    """
    from dataclasses import replace

    from validation.bench.suite import BenchOptions, run_bench

    opts = replace(options or BenchOptions(), **fields)
    from rackcert.core.known_hosts import rack_file

    recorded = rack_file(loaded.spec, run_dir)  # the rack's pinned or enrolled host keys
    if opts.known_hosts is None and recorded.is_file():
        opts.known_hosts = recorded
    record = run_bench(loaded.spec, run_dir, opts, progress or (lambda _m: None))
    if localise is None:
        return record
    from validation.bench.localise import run_into

    return run_into(loaded.spec, run_dir, opts, localise, record, progress or (lambda _m: None))
