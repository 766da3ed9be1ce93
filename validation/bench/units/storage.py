"""Storage: parallel random reads from the training data mount, on this machine or on every
node (the reader, validation.bench.node.storage, runs there)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from rackcert.core.results import VerdictCheck
from rackcert.core.runs import RunDir
from rackcert.core.spec import Certification, Spec
from validation.bench import launch
from validation.bench.node import storage
from validation.bench.node.declare import Opt
from validation.bench.options import BenchOptions, Point
from validation.bench.targets import nodes_of, remote_python
from validation.bench.transport import Step
from validation.bench.units.base import BenchUnit, Context, check

READER = "validation.bench.node.storage"  # what each node runs (the worker wheel ships it)


def storage_target(spec: Spec, opts: BenchOptions) -> tuple[Path | None, bool, str]:
    """(directory, synthetic allowed, note); directory None when there is nothing to read."""
    nfs = spec.storage.nfs
    allow = (
        opts.synthetic_data
        if opts.synthetic_data is not None
        else bool(nfs and nfs.create_synthetic_data)
    )
    if opts.storage_dir:
        return opts.storage_dir, allow, "directory given with --storage-dir"
    if nfs is None:
        return None, allow, "the spec has no storage.nfs and no --storage-dir was given"
    return Path(nfs.mount_point), allow, f"the spec's mount point ({nfs.server}:{nfs.export})"


def run_storage(spec: Spec, opts: BenchOptions, run: RunDir, points: list[Point]) -> dict[str, Any]:
    root, allow, note = storage_target(spec, opts)
    cfg = storage.StorageConfig.quick() if opts.quick else storage.StorageConfig()
    if root is None:
        return {"skipped": True, "reason": note}
    if opts.local:
        scratch = None
        if not root.is_dir():
            if not allow:
                return {"skipped": True, "reason": f"{root} does not exist here ({note})"}
            scratch = Path(tempfile.mkdtemp(prefix="storage-", dir=run.artifacts("bench")))
            note = f"{root} does not exist here; synthetic files in a scratch directory"
            root = scratch
        try:
            result = storage.run(root, cfg, allow_synthetic=allow, engine=opts.storage_engine)
        except (OSError, ValueError) as exc:
            return {"skipped": True, "reason": str(exc)}
        finally:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
        total = result["throughput_mb_s"]
        return {"note": note, "path": result["path"], "throughput_mb_s": total, "nodes": [result]}
    nodes = nodes_of(spec, points[-1].vms, opts)
    py = remote_python(spec, opts)
    rdir = opts.remote_dir
    base = f"cd /tmp && {py} -m {READER} {root}"
    if rdir:
        base = f"cd {rdir} && PYTHONPATH={rdir} {py} -m {READER} {root}"
    base += " --quick" if opts.quick else ""
    base += f" --engine {opts.storage_engine}"
    log = run.artifacts("bench") / "storage.log"
    if allow:
        first = Step.on_all(nodes[:1], f"{base} --synthetic --prepare", "rackcert-storage")
        prep = launch.on_nodes("storage prepare", [first], tty=False)
        launch.execute(prep, log.with_name("storage-prepare.log"), timeout_s=600)
    every = Step.on_all(nodes, base, "rackcert-storage")
    results = launch.execute(launch.on_nodes("storage", [every], tty=False), log, timeout_s=600)
    per_node = [
        {**{k: v for k, v in r.items() if k != "wall_s"}, "node": n.name}
        for r, n in zip(results, nodes, strict=True)
        if r
    ]
    total = sum(r["throughput_mb_s"] for r in per_node)
    return {"note": note, "path": str(root), "throughput_mb_s": total, "nodes": per_node}


class StorageUnit(BenchUnit):
    """Parallel random reads from the training data mount, on this machine or every node."""

    name = "storage"
    after_launches = True
    help = "parallel random reads from the data mount"
    options = (
        Opt("storage_dir", "path", "Read this directory instead of the mount"),
        Opt(
            "synthetic_data",
            "bool",
            "Create small files if the data directory is empty (default: the spec's"
            " storage.nfs.create_synthetic_data)",
        ),
        Opt(
            "storage_engine",
            "str",
            "auto (fio when installed), fio or pread",
            default="auto",
            choices=("auto", "fio", "pread"),
        ),
    )

    def run(self, ctx: Context) -> dict[str, Any]:
        ctx.progress("storage: parallel random reads")
        return run_storage(ctx.spec, ctx.opts, ctx.run, ctx.points)

    def checks(self, data: dict[str, Any], cert: Certification) -> list[VerdictCheck]:
        return [storage_ok(data.get("storage"))]

    def lines(self, data: dict[str, Any]) -> list[str]:
        st = data.get("storage") or {}
        if st and not st.get("skipped"):
            return [
                f"storage: {st['throughput_mb_s']:.1f} MB/s random reads ({st.get('note', '')})"
            ]
        return []


def storage_ok(storage: dict[str, Any] | None) -> VerdictCheck:
    """The random-read benchmark read data without errors."""
    if not storage or storage.get("skipped"):
        reason = (storage or {}).get("reason", "storage benchmark not run")
        return check("storage.read", None, "", "reads without errors", reason)
    nodes = storage.get("nodes") or [storage]
    errors = sum(n.get("errors", 0) for n in nodes)
    reads = sum(n.get("reads", 0) for n in nodes)
    return check(
        "storage.read",
        errors == 0 and reads > 0,
        f"{reads} reads, {errors} errors",
        "reads without errors",
    )
