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
from dataclasses import replace
from typing import Any

from validation.bench.node import allreduce_loop, compilecache, declare, environment, resnet_loop
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
        help="comma list: allreduce,resnet,naive,plain,horovod_ref (the last two: references)",
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


def given(args: argparse.Namespace, name: str) -> Any:
    """A declared option's value; None when the launch did not pass it."""
    return getattr(args, name, None)


def train_config(args: argparse.Namespace, device_type: str) -> resnet_loop.TrainConfig:
    cfg = resnet_loop.TrainConfig.for_device(device_type, args.quick)
    if args.profile == "naive":
        cfg = cfg.naive()
    mode = given(args, "compile_mode")
    overrides = {
        k: v
        for k, v in {
            "model": given(args, "model"),
            "batch": given(args, "batch"),
            "image_size": given(args, "image_size"),
            "precision": given(args, "precision"),
            "compile": given(args, "compile"),
            "compile_mode": None if mode == "default" else mode,
            "compile_optimizer": given(args, "compile_optimizer"),
            "fused_optimizer": args.fused,
            "channels_last": args.channels_last,
            "cudnn_benchmark": args.cudnn_benchmark,
            "warmup_steps": args.warmup_steps,
            "settle_s": args.settle_s,
            "intervals": args.intervals,
            "steps_per_interval": args.steps_per_interval,
        }.items()
        if v is not None
    }
    if mode == "default":
        overrides["compile_mode"] = None
    return replace(cfg, **overrides)


def reference_config(
    args: argparse.Namespace, device_type: str, which: str
) -> resnet_loop.TrainConfig:
    """The fixed reference loops, on the same schedule as the default (model and image size
    may be overridden, the recipe may not). Horovod's batch 32 runs 8x the steps per
    interval, so its intervals time as many images as the default's."""
    base = resnet_loop.TrainConfig.for_device(device_type, args.quick)
    for key, value in (("model", given(args, "model")), ("image_size", given(args, "image_size"))):
        if value is not None:
            base = replace(base, **{key: value})
    if which == "plain":
        return base.plain()
    ref = base.horovod_defaults()
    scale = max(1, base.batch // ref.batch)
    return replace(ref, steps_per_interval=base.steps_per_interval * scale)


# How far a CPU sweep may double past its top size while a call's fixed time still weighs
# (allreduce_loop.needs_larger): at the lab's 100 Mbit/s, 16 MiB is ~2 s per call.
CPU_EXTEND_TO = 16 << 20


def sweep_args(
    args: argparse.Namespace, device_type: str
) -> tuple[list[int], int, int, int | None]:
    """(sizes, timed iterations, warm-up, how far the sweep may double on past the sizes).

    A CPU sweep of the default range may double on up to CPU_EXTEND_TO while the fixed time
    of a call still weighs on its largest size (allreduce_loop.needs_larger); one whose range
    was given (--max-bytes, or a --min-bytes above a few KiB: no small size to tell the fixed
    time by) runs exactly that range, as does a GPU sweep (its range is already large)."""
    gpu = device_type == "cuda"
    extend_to = None
    if given(args, "max_bytes"):
        top = given(args, "max_bytes")
    elif args.quick:
        top = (64 << 20) if gpu else (1 << 20)
    else:
        top = (1 << 30) if gpu else (64 << 20)
    if not gpu and not given(args, "max_bytes") and args.min_bytes <= 4096:
        extend_to = max(top, CPU_EXTEND_TO)
    iters = args.iters or (5 if args.quick else 20)
    warm = args.warmup_iters if args.warmup_iters is not None else (2 if args.quick else 5)
    return allreduce_loop.sweep_sizes(args.min_bytes, top), iters, warm, extend_to


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

    comm = connect(args.backend, args.device)
    lap("connect_s")  # torch (and Horovod) imported, the ranks met
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
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
        if "allreduce" in tasks:
            sizes, iters, warm, extend_to = sweep_args(args, comm.device.type)
            points = allreduce_loop.run_sweep(
                comm, sizes, iters=iters, warmup=warm, extend_to=extend_to
            )
            out["allreduce"] = {
                "points": points,
                "iters": iters,
                "warmup": warm,
            }
            lap("allreduce_s")
        if "resnet" in tasks:
            out["resnet"] = resnet_loop.train(comm, train_config(args, comm.device.type))
            lap("resnet_s")
        if "naive" in tasks:
            out["naive"] = resnet_loop.train(comm, train_config(args, comm.device.type).naive())
            lap("naive_s")
        for ref in ("plain", "horovod_ref"):
            if ref in tasks:
                which = "plain" if ref == "plain" else "horovod"
                out[ref] = resnet_loop.train(comm, reference_config(args, comm.device.type, which))
                lap(f"{ref}_s")
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
