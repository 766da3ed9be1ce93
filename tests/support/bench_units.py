"""What more than one test module needs from the old test_bench_units.py:
tests/integration/test_bench_units.py, tests/integration/test_bench_verdict.py,
tests/unit/test_bench_units.py, tests/unit/test_bench_verdict.py.
"""

from __future__ import annotations

from rackcert.core.results import (
    AllreducePoint,
    AllreduceResult,
    ScalingPoint,
    ScalingResult,
)


def ar(world: int, fraction: float | None, correct: bool = True) -> AllreduceResult:
    pt = AllreducePoint(
        size_bytes=8, count=2, time_us=1.0, algbw_gbps=1.0, busbw_gbps=1.0, correct=correct
    )
    return AllreduceResult(
        backend="gloo",
        device="cpu",
        world_size=world,
        points=[pt],
        line_rate_gbps=100.0,
        busbw_fraction=fraction,
    )


def sc(per_gpu: list[float]) -> ScalingResult:
    base = per_gpu[0]
    pts = [
        ScalingPoint(
            nodes=2**i,
            gpus=2**i,
            images_per_sec=v * 2**i,
            images_per_sec_per_gpu=v,
            speedup=v * 2**i / base,
            efficiency=v / base,
        )
        for i, v in enumerate(per_gpu)
    ]
    return ScalingResult(
        batch_per_gpu=256, precision="fp16", channels_last=True, device="cuda", points=pts
    )
