"""Issue 56: an allreduce figure that is the lab's shared CPU, told from the link by what was
measured. The sweep doubles on while a call's fixed time (its small sizes' time) weighs on
its largest size; the record keeps that time and the figure without it; the demo's summary
names the shared CPU exactly when the figure without the fixed time meets the rule and more
ranks run than there are cores, and calls it a finding otherwise."""

from __future__ import annotations

import argparse

import pytest

from rackcert.lab.explain import BenchFailure, explain
from validation.bench.node import allreduce_loop, allreduce_task
from validation.bench.units.allreduce import busbw_fraction_less_fixed, fixed_time_us

pytestmark = pytest.mark.unit

LINE_GBPS = 0.1
FACTOR4 = allreduce_loop.busbw_factor(4)


def _point(size: int, time_us: float, world: int = 4) -> dict:
    algbw = allreduce_loop.algbw_gbps(size, time_us / 1e6)
    return {"size_bytes": size, "time_us": time_us,
            "busbw_gbps": allreduce_loop.busbw_gbps(algbw, world)}  # fmt: skip


def _link_us(size: int) -> float:
    """A ring's time for `size` over the lab's 100 Mbit/s link: 1.5 x size at the line rate."""
    return size * FACTOR4 * 8 / (LINE_GBPS * 1e9) * 1e6


def _sweep(fixed_us: float, top: int = 1 << 20) -> list[dict]:
    """A Horovod-like sweep: every call costs `fixed_us` plus the link's time for its bytes."""
    return [_point(s, fixed_us + _link_us(s)) for s in allreduce_loop.sweep_sizes(8, top)]


def test_the_sweep_doubles_on_while_a_calls_fixed_time_weighs() -> None:
    slow = _sweep(30_000)  # 30 ms a call: 1 MiB's 126 ms link time is not yet the figure
    assert allreduce_loop.fixed_share(slow) > allreduce_loop.FIXED_SHARE_MAX
    assert allreduce_loop.needs_larger(slow, 2 << 20, extend_to=16 << 20)
    assert not allreduce_loop.needs_larger(slow, 32 << 20, extend_to=16 << 20)  # the cap
    assert not allreduce_loop.needs_larger(slow, 2 << 20, extend_to=None)  # range given
    quick = _sweep(2_000)  # 2 ms a call: 1 MiB (126 ms) already levels off
    assert not allreduce_loop.needs_larger(quick, 2 << 20, extend_to=16 << 20)
    far = _sweep(30_000, top=16 << 20)
    assert allreduce_loop.fixed_share(far) <= allreduce_loop.FIXED_SHARE_MAX


@pytest.mark.parametrize(
    ("device", "max_bytes", "min_bytes", "extend_to"),
    [("cpu", None, 8, allreduce_task.CPU_EXTEND_TO), ("cpu", 16384, 8, None),
     ("cpu", None, 1 << 20, None), ("cuda", None, 8, None)],
)  # fmt: skip
def test_only_a_default_cpu_sweep_may_double_on(device, max_bytes, min_bytes, extend_to) -> None:
    args = argparse.Namespace(
        max_bytes=max_bytes, quick=True, min_bytes=min_bytes, iters=None, warmup_iters=None
    )
    sizes, _iters, _warm, got = allreduce_task.sweep_args(args, device)
    assert got == extend_to
    assert sizes[-1] == (max_bytes or ((64 << 20) if device == "cuda" else 1 << 20))


def test_the_record_keeps_the_fixed_time_and_the_figure_without_it() -> None:
    points = _sweep(30_000)
    assert fixed_time_us(points) == pytest.approx(30_000, rel=1e-3)
    # One small size that waited for a core on its own does not move the fixed time.
    spiked = [dict(p, time_us=98_000) if p["size_bytes"] == 64 else p for p in points]
    assert fixed_time_us(spiked) == pytest.approx(30_000, rel=1e-2)
    top = points[-3:]
    raw = sum(p["busbw_gbps"] for p in top) / 3 * 8 / LINE_GBPS
    assert raw < 0.7  # the check's own figure fails the lab's rule...
    less = busbw_fraction_less_fixed(points, LINE_GBPS)
    assert less == pytest.approx(1.0, abs=1e-3)  # ...the link carried its rate
    # No small size to tell a call's fixed time by, or no line rate: no figure.
    assert fixed_time_us(points[12:]) is None
    assert busbw_fraction_less_fixed(points[12:], LINE_GBPS) is None
    assert busbw_fraction_less_fixed(points, None) is None
    # A slow link stays slow without the fixed time: half the rate is half the rate.
    half = [_point(s, 30_000 + 2 * _link_us(s)) for s in allreduce_loop.sweep_sizes(8, 1 << 20)]
    assert busbw_fraction_less_fixed(half, LINE_GBPS) == pytest.approx(0.5, abs=0.01)


def _allreduce(ranks: int, fixed_us: float | None, less: float | None) -> BenchFailure:
    return BenchFailure("allreduce.busbw_fraction", "0.662 of 0.1 Gb/s over nic (2 nodes)",
                        ranks=ranks, fixed_time_us=fixed_us, fraction_less_fixed=less,
                        fraction_min=0.7)  # fmt: skip


@pytest.mark.parametrize(
    ("failure", "shared_cpu"),
    [
        (_allreduce(4, 31_000, 0.97), True),  # the lab's shared CPU, and the link held
        (_allreduce(4, 31_000, 0.55), False),  # the link itself is slow: a finding
        (_allreduce(2, 31_000, 0.97), False),  # a core per rank: the CPU excuses nothing
        (_allreduce(4, None, 0.97), False),  # no fixed time measured: nothing shows it
        (_allreduce(4, 31_000, None), False),
        (BenchFailure("allreduce.busbw_fraction", "0.662 of 0.1 Gb/s"), False),  # old record
    ],
)
def test_the_shared_cpu_explains_the_allreduce_exactly_when_its_figures_show_it(
    failure: BenchFailure, shared_cpu: bool
) -> None:
    got = explain([], [failure], cores=2)
    assert bool(got.shared_cpu) is shared_cpu
    assert bool(got.findings) is not shared_cpu
    (line,) = got.lines(cores=2)
    if shared_cpu:
        assert line.startswith("allreduce.busbw_fraction (0.662 of 0.1 Gb/s over nic (2 nodes))")
        assert "every call cost 31 ms whatever its size" in line
        assert "4 ranks on this machine's 2 CPU core(s)" in line
        assert "busbw is 0.97 of the line rate (the rule: 0.7)" in line
    else:
        assert line.startswith("not explained by the lab (a finding; see the report)")
