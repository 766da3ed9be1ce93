"""The process torchrun or horovodrun starts on every rank: run the asked benchmarks.

    python -m torch.distributed.run --standalone --nproc-per-node 2 \\
        -m validation.bench.node.worker --tasks allreduce,resnet --quick
    horovodrun --gloo -np 2 -H localhost:2 python -m validation.bench.node.worker --backend horovod
    python -m validation.bench.node.worker --tasks allreduce \\
        --declared '[["max_bytes","int",[]]]' --max-bytes 65536

A benchmark's own options (--batch, --max-bytes, ...) are declared once, in its unit's file
on the controller (validation.bench.units); a launch passes their declarations as data
(`--declared`, validation.bench.node.declare) before their flags, and this parser is built
from them.

Every rank takes part; rank 0 prints one line `RACKCERT_RESULT <json>` on stdout, which
the launcher reads (over SSH too, so no shared file system is needed). Every rank then
prints `RACKCERT_DONE <rank>` once its process groups are torn down: a rank that crashes
after that (a library's exit handlers) has finished its work, and the launcher records
the crash as a warning instead of failing the measured launch. Needs torch and the
standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from typing import Any

from validation.bench.node import compilecache, declare, environment, tasks
from validation.bench.node.comm import connect

MARKER = "RACKCERT_RESULT "
DONE = "RACKCERT_DONE "


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="validation.bench.node.worker", description=__doc__)
    p.add_argument("--backend", choices=["torch", "horovod"], default="torch")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument(
        "--tasks",
        default="allreduce,resnet",
        help="comma list of registered tasks (validation.bench.node.tasks): allreduce,resnet,"
        "naive,plain,horovod_ref and any a --task-module registers",
    )
    p.add_argument(
        "--task-module",
        action="append",
        default=[],
        help="a module to import that registers more tasks (a unit's node side outside"
        " validation.bench.node); repeatable",
    )
    p.add_argument("--quick", action="store_true", help="small sizes, few steps")
    p.add_argument("--min-bytes", type=int, default=8)
    p.add_argument("--iters", type=int, help="timed allreduce iterations per size (20)")
    p.add_argument("--warmup-iters", type=int, help="allreduce warm-up iterations (5)")
    p.add_argument("--profile", choices=["default", "naive"], default="default")
    p.add_argument("--fused", dest="fused", action="store_true", default=None)
    p.add_argument("--no-fused", dest="fused", action="store_false")
    p.add_argument("--channels-last", dest="channels_last", action="store_true", default=None)
    p.add_argument("--no-channels-last", dest="channels_last", action="store_false")
    p.add_argument("--cudnn-benchmark", dest="cudnn_benchmark", action="store_true", default=None)
    p.add_argument("--no-cudnn-benchmark", dest="cudnn_benchmark", action="store_false")
    p.add_argument("--warmup-steps", type=int)
    p.add_argument(
        "--settle-s", type=float, help="untimed seconds of steps after the warm-up (5 on GPUs)"
    )
    p.add_argument("--intervals", type=int)
    p.add_argument("--steps-per-interval", type=int)
    p.add_argument(
        "--compile-cache",
        help="directory for inductor's FX graph/AOTAutograd caches and Triton's kernels, kept"
        " between runs (TORCHINDUCTOR_CACHE_DIR in the environment wins)",
    )
    # The benchmarks' own options (--batch, --max-bytes, ...) are declared in their unit's
    # file on the controller; a launch sends their declarations as data (node/declare.py).
    declare.add_declared(p, argv)
    args, rest = p.parse_known_args(argv)
    if rest:
        p.error(
            f"unrecognized arguments: {' '.join(rest)} (a benchmark's option needs its"
            " declaration before it: --declared, as `rackcert bench` passes it)"
        )
    return args


def cpu_threads(device_type: str) -> int | None:
    """One intra-op thread per CPU rank, unless OMP_NUM_THREADS says otherwise; None on GPUs.

    Why: torch starts as many OpenMP threads as the node has cores in every rank, and the
    ranks of a CPU launch share those cores; OpenMP's waiting threads spin, so two ranks of
    two threads on two cores ran ResNet50's steps 5-8x slower than two ranks of one thread
    (measured under horovodrun, which, unlike torchrun, leaves OMP_NUM_THREADS unset). The
    local bench already runs one thread per rank (validation.bench.orchestrate), torchrun sets it
    for more than one process: now every launcher's CPU ranks run alike.
    """
    if device_type != "cpu":
        return None
    import torch

    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)
    return int(torch.get_num_threads())


def process_age_s() -> float | None:
    """Seconds since this process started (Linux /proc), None where that cannot be read.

    Why: a launch's wall time is the launcher's start (ssh, horovodrun's checks), the
    interpreter's, torch's import and the rendezvous, then the work; the age at main() and
    the phases after it say which of them a slow launch spent its time on.
    """
    try:
        with open("/proc/self/stat") as f:
            started = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: starttime
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return round(uptime - started / os.sysconf("SC_CLK_TCK"), 2)
    except (OSError, ValueError, IndexError):
        return None


def run(args: argparse.Namespace, cache: dict[str, Any] | None = None) -> dict[str, Any]:
    # rank 0's own clock: started_s its age at this point, the rest what each phase took
    phases: dict[str, float | None] = {"started_s": process_age_s()}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        phases[name] = round(now - clock, 2)
        clock = now

    wanted = [t.strip() for t in args.tasks.split(",") if t.strip()]
    registered = tasks.load(args.task_module)
    unknown = [t for t in wanted if t not in registered]
    if unknown:  # before the ranks meet: a typo fails at once on every rank alike
        raise SystemExit(
            f"validation.bench.node.worker: --tasks {unknown[0]!r}: no such task"
            f" (registered: {', '.join(sorted(registered))})"
        )
    comm = connect(args.backend, args.device)
    lap("connect_s")  # torch (and Horovod) imported, the ranks met
    out: dict[str, Any] = {
        "backend": comm.backend,
        "world_size": comm.world_size,
        "device": comm.device.type,
        "phases": phases,
    }
    threads = cpu_threads(comm.device.type)
    if threads is not None:
        out["cpu_threads"] = threads
    if cache is not None:
        out["compile_cache"] = cache
    try:
        where = {"host": socket.gethostname(), "local_rank": comm.local_rank}
        if comm.device.type == "cuda":
            where["bus_id"] = environment.device_bus_id(comm.device)
        out["ranks"] = [{"rank": i, **w} for i, w in enumerate(comm.allgather_object(where))]
        if comm.rank == 0:
            out["environment"] = environment.collect()
        lap("environment_s")  # the ranks' places gathered, rank 0's versions read
        for name in wanted:  # in the order asked (the units' order)
            out[name] = registered[name](comm, args)
            lap(f"{name}_s")
    finally:
        comm.close()
    out["rank"] = comm.rank
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    cache = compilecache.use(args.compile_cache)  # before torch is imported
    result = run(args, cache)
    rank = result.pop("rank")
    if rank == 0:
        sys.stdout.write(MARKER + json.dumps(result) + "\n")
    sys.stdout.write(f"{DONE}{rank}\n")
    sys.stdout.flush()
    return 0


def leave(code: int) -> None:
    """End the process without the interpreter's own teardown, once the work is reported
    and the process groups are destroyed: C++ libraries' static destructors are all that
    is left then, and one of them can abort the process ("terminate called without an
    active exception": a thread still joinable), as seen on rank 0 of a three-rank Gloo
    launch on two CPU cores, after its RACKCERT_DONE line, about one run in six. Measures
    nothing, so it must not fail a launch. Child processes torch.compile started watch
    for their parent and stop on their own."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    leave(main())
