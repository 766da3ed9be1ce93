"""Allreduce sweep with nccl-tests' arithmetic, and a check of the reduced values.

Definitions (nccl-tests, doc/PERFORMANCE.md):
- algbw = bytes / time, in GB/s (1e9 bytes per second);
- busbw = algbw x 2(n-1)/n for all_reduce: the bytes each rank's link really carries in a
  ring, so that the figure is comparable with the link's line rate whatever n is. With
  n = 1 no byte crosses a link and busbw is 0 by that definition.
The time of one size is the slowest rank's mean over the timed iterations (after warm-up),
so one slow link shows. Correctness: every rank fills its buffer with a rank-dependent
pattern of small integers whose sum is exact in float32, allreduces once, and compares.

busbw compares with a line rate only where a call's time is the bytes' time on the link:
every call also costs a fixed time whatever its size (the small sizes' time: the engine's
coordination, and on CPU ranks every wake-up of its threads). Where the sweep's largest
size still spends more than FIXED_SHARE_MAX of its time on that, the sweep goes on doubling
(up to `extend_to`), as one reads nccl-tests' busbw at the sizes where it has levelled off.
Measured in the lab (benchmarks/allreduce_paths.py, 4 CPU ranks on 2 nodes of a 2-core
machine at load 17-50, 100 Mbit/s links): Horovod's Gloo path sent a ring's bytes (1.45-1.50
x size per node, as torch.distributed's) but an 8-byte call took 12-80 ms (torch: 3-11), so
its busbw over the sweep's top sizes up to 1 MiB read 0.48-0.98 of the line rate run to run
(torch: 0.94-1.02), while over 4 MiB calls it held 0.79-0.96 (docs/lab.md).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

PATTERN = 7  # element i of rank r holds (r + 1) + (i % PATTERN): sums are exact in float32
# The most of a call's time the sweep's largest size may spend on the fixed time every call
# costs (fixed_time_us) before the sweep doubles on (see the module's docstring).
# 2%: in three lab demos under Horovod (load 17-33) the sizes where the fixed time fell to 5%
# still read 0.62-0.84 (the ranks' waits for a core slow the bytes too, not only the start of
# a call); past 2% (8-16 MiB) they read 0.84-0.97.
FIXED_SHARE_MAX = 0.02
FIXED_SIZE_MAX = 4096  # sizes whose time is a call's fixed time (fixed_time_us)


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


def fixed_time_us(points: list[dict[str, Any]]) -> float | None:
    """What a call costs whatever its size: the median time of the sizes up to
    FIXED_SIZE_MAX (they carry no bandwidth worth the name); None without such a size.
    The median, because on shared cores one size's time can hold a wait of its own (in one
    lab sweep under Horovod: 17-98 ms across the sizes up to 4 KiB, median 25 ms)."""
    small = sorted(p["time_us"] for p in points if p["size_bytes"] <= FIXED_SIZE_MAX)
    return float(statistics.median(small)) if small else None


def fixed_share(points: list[dict[str, Any]]) -> float:
    """The share of the largest size's time that every call costs whatever its size
    (fixed_time_us over the largest size's time; points in size order)."""
    fixed, last = fixed_time_us(points), points[-1]["time_us"]
    if fixed is None:
        return 0.0
    return fixed / last if last > 0 else 1.0


def needs_larger(points: list[dict[str, Any]], size: int, extend_to: int | None) -> bool:
    """Whether the sweep doubles on to `size`: its largest so far still spends more than
    FIXED_SHARE_MAX of its time on a call's fixed time, and `size` is within `extend_to`.
    Decided from figures gathered from every rank (the same on each), so that every rank
    runs the same sizes."""
    if not extend_to or size > extend_to or len(points) < 2:
        return False
    return fixed_share(points) > FIXED_SHARE_MAX


def run_sweep(
    comm: Any,
    sizes: list[int],
    *,
    iters: int = 20,
    warmup: int = 5,
    dtype: str = "float32",
    extend_to: int | None = None,
) -> list[dict[str, Any]]:
    """Measure every size on every rank; returns one dict per size (same on every rank).

    `extend_to`: past the last of `sizes`, keep doubling up to this many bytes while a
    call's fixed time is more than FIXED_SHARE_MAX of the largest size's (needs_larger).
    """
    points = [_measure(comm, size, iters, warmup, dtype) for size in sizes]
    size = sizes[-1] * 2 if sizes else 0
    while needs_larger(points, size, extend_to):
        points.append(_measure(comm, size, iters, warmup, dtype))
        size *= 2
    return points


def _measure(comm: Any, size: int, iters: int, warmup: int, dtype: str) -> dict[str, Any]:
    """One size: a checked allreduce, the warm-up, then the timed iterations."""
    import torch

    tdtype = getattr(torch, dtype)
    elem = torch.tensor([], dtype=tdtype).element_size()
    cpu = comm.device.type == "cpu"
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
    del buf
    return {
        "size_bytes": count * elem,
        "count": count,
        "time_us": seconds * 1e6,
        "algbw_gbps": algbw,
        "busbw_gbps": busbw_gbps(algbw, comm.world_size),
        "correct": all(r[1] == 1.0 for r in rows),
        "iters": n,
    }
