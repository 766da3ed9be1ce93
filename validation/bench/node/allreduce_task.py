"""The worker task `allreduce`: the allreduce sweep (validation.bench.node.allreduce_loop),
its sizes and iterations from the worker's arguments. Registered with the worker by name
(validation.bench.node.tasks); the controller's side is validation.bench.units.allreduce."""

from __future__ import annotations

import argparse
from typing import Any

from validation.bench.node import allreduce_loop
from validation.bench.node.tasks import given, task


def sweep_args(args: argparse.Namespace, device_type: str) -> tuple[list[int], int, int]:
    gpu = device_type == "cuda"
    if given(args, "max_bytes"):
        top = given(args, "max_bytes")
    elif args.quick:
        top = (64 << 20) if gpu else (1 << 20)
    else:
        top = (1 << 30) if gpu else (64 << 20)
    iters = args.iters or (5 if args.quick else 20)
    warm = args.warmup_iters if args.warmup_iters is not None else (2 if args.quick else 5)
    return allreduce_loop.sweep_sizes(args.min_bytes, top), iters, warm


@task("allreduce")
def allreduce(comm: Any, args: argparse.Namespace) -> dict[str, Any]:
    sizes, iters, warm = sweep_args(args, comm.device.type)
    return {
        "points": allreduce_loop.run_sweep(comm, sizes, iters=iters, warmup=warm),
        "iters": iters,
        "warmup": warm,
    }
