"""Allreduce sweep with nccl-tests' arithmetic, and a check of the reduced values.

Definitions (nccl-tests, doc/PERFORMANCE.md):
- algbw = bytes / time, in GB/s (1e9 bytes per second);
- busbw = algbw x 2(n-1)/n for all_reduce: the bytes each rank's link really carries in a
  ring, so that the figure is comparable with the link's line rate whatever n is. With
  n = 1 no byte crosses a link and busbw is 0 by that definition.
The time of one size is the slowest rank's mean over the timed iterations (after warm-up),
so one slow link shows. Correctness: every rank fills its buffer with a rank-dependent
pattern of small integers whose sum is exact in float32, allreduces once, and compares.
"""

from __future__ import annotations

import time
from typing import Any

PATTERN = 7  # element i of rank r holds (r + 1) + (i % PATTERN): sums are exact in float32


def sweep_sizes(min_bytes: int = 8, max_bytes: int = 1 << 30) -> list[int]:
    """Message sizes from min_bytes to max_bytes, doubling (8 B .. 1 GiB by default)."""
    if min_bytes < 4 or max_bytes < min_bytes:
        raise ValueError(f"bad allreduce size range {min_bytes}..{max_bytes}")
    sizes, size = [], min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size *= 2
    return sizes


def algbw_gbps(size_bytes: int, seconds: float) -> float:
    """Algorithm bandwidth in GB/s: bytes / time (nccl-tests' algbw)."""
    return size_bytes / seconds / 1e9 if seconds > 0 else 0.0


def busbw_factor(world_size: int) -> float:
    """2(n-1)/n: nccl-tests' all_reduce correction from algbw to bus bandwidth."""
    return 2.0 * (world_size - 1) / world_size


def busbw_gbps(algbw: float, world_size: int) -> float:
    return algbw * busbw_factor(world_size)


def expected_sum(index: int, world_size: int) -> float:
    """What element `index` holds after the sum over ranks 0..n-1 of the fill pattern."""
    return world_size * (world_size + 1) / 2 + world_size * (index % PATTERN)


def _fill(tensor: Any, rank: int) -> None:
    import torch

    idx = torch.arange(tensor.numel(), device=tensor.device) % PATTERN
    tensor.copy_(idx.to(tensor.dtype) + (rank + 1))


def _check(tensor: Any, world_size: int) -> bool:
    import torch

    idx = torch.arange(tensor.numel(), device=tensor.device) % PATTERN
    want = idx.to(torch.float64) * world_size + world_size * (world_size + 1) / 2
    return bool(torch.equal(tensor.to(torch.float64), want))


def iterations_for(size_bytes: int, iters: int, cpu: bool) -> int:
    """Fewer iterations for big messages on CPUs (Gloo over 2 shared cores is slow)."""
    if cpu and size_bytes >= 16 << 20:
        return max(2, iters // 4)
    return iters


def run_sweep(
    comm: Any, sizes: list[int], *, iters: int = 20, warmup: int = 5, dtype: str = "float32"
) -> list[dict[str, Any]]:
    """Measure every size on every rank; returns one dict per size (same on every rank)."""
    import torch

    tdtype = getattr(torch, dtype)
    elem = torch.tensor([], dtype=tdtype).element_size()
    cpu = comm.device.type == "cpu"
    points: list[dict[str, Any]] = []
    for size in sizes:
        count = max(1, size // elem)
        buf = torch.empty(count, dtype=tdtype, device=comm.device)
        _fill(buf, comm.rank)
        comm.allreduce_(buf)
        comm.synchronize()
        correct = _check(buf, comm.world_size)
        buf.zero_()  # timed iterations on zeros: values stay finite however many we run
        n = iterations_for(size, iters, cpu)
        for _ in range(warmup):
            comm.allreduce_(buf)
        comm.synchronize()
        comm.barrier()
        start = time.perf_counter()
        for _ in range(n):
            comm.allreduce_(buf)
        comm.synchronize()
        mine = (time.perf_counter() - start) / n
        rows = comm.allgather_floats([mine, 1.0 if correct else 0.0])
        seconds = max(r[0] for r in rows)
        algbw = algbw_gbps(count * elem, seconds)
        points.append(
            {
                "size_bytes": count * elem,
                "count": count,
                "time_us": seconds * 1e6,
                "algbw_gbps": algbw,
                "busbw_gbps": busbw_gbps(algbw, comm.world_size),
                "correct": all(r[1] == 1.0 for r in rows),
                "iters": n,
            }
        )
        del buf
    return points
