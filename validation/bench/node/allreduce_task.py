"""The worker task `allreduce`: the allreduce sweep (validation.bench.node.allreduce_loop),
its sizes and iterations from the worker's arguments. Registered with the worker by name
(validation.bench.node.tasks); the controller's side is validation.bench.units.allreduce."""

from __future__ import annotations

import argparse
from typing import Any

from validation.bench.node import allreduce_loop
from validation.bench.node.tasks import given, task

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


@task("allreduce")
def allreduce(comm: Any, args: argparse.Namespace) -> dict[str, Any]:
    sizes, iters, warm, extend_to = sweep_args(args, comm.device.type)
    return {
        "points": allreduce_loop.run_sweep(
            comm, sizes, iters=iters, warmup=warm, extend_to=extend_to
        ),
        "iters": iters,
        "warmup": warm,
        "rank_wait": comm.rank_wait,
    }
