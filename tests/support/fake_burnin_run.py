"""A burn-in node's record made under the FAKE NVML (tests/support/fake_nvml.py): the node's own
watch (validation.bench.node.burnin.Watch) on a simulated clock, the HBM pattern test on CPU
tensors, ports from a sysfs-like tree. Shared by the watch, report and metrics tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from tests.support.fake_nvml import FakeNvml, Plant, write_ib_port
from validation.bench.node import burnin as node

MINUTES = 20
GPUS = 2


class Sim:
    """The run's clock: `wait(d)` moves it on, feeds each GPU's GEMM batches for the time
    passed and lets the fakes act (the XID, the port counter)."""

    def __init__(self, fake: FakeNvml, rates: list[node.Rates], on_tick: Any = None) -> None:
        self.t = 0.0
        self.fake, self.rates, self.on_tick = fake, rates, on_tick

    def now(self) -> float:
        return self.t

    def wait(self, d: float) -> bool:
        self.t += d
        for g, r in enumerate(self.rates):
            r.add(self.t, d, self.fake.tflops(g) * 1e12 * d)
        self.fake.tick()
        if self.on_tick:
            self.on_tick(self.t)
        return False


def simulated_run(tmp_path: Path, plant: Plant | None, hbm_flip: bool = False) -> dict[str, Any]:
    """One node's burn-in record: MINUTES of watch under the fake, as the node prints it."""
    log = tmp_path / "kern.log"
    log.write_text("[    1.000000] Linux version 6.8.0\n")
    sysfs = tmp_path / "sys"
    port = write_ib_port(sysfs, "mlx5_0", 1, symbol_error=2)
    rates = [node.Rates() for _ in range(GPUS)]
    fake = FakeNvml(gpus=GPUS, clock=lambda: sim.now(), plant=plant, kernel_log=log)

    def grow(t: float) -> None:
        if plant is not None and plant.kind == "port" and t >= plant.minute * 60:
            (port / "counters" / "symbol_error").write_text("9\n")

    sim = Sim(fake, rates, grow)
    handles = node.gpu_handles(fake, GPUS)
    watch = node.Watch(fake, handles, rates, 1.0, str(sysfs), str(log), 30.0, sim.now, sim.wait)
    before = watch.counters()
    series, new_xids = watch.run(lambda: sim.now() >= MINUTES * 60, 0.0)
    after = watch.counters()
    hbm = []
    for g in range(GPUS):
        bufs = [torch.empty(1 << 16, dtype=torch.int32) for _ in range(3)]
        scratch = torch.empty(1 << 12, dtype=torch.int32)

        def flip(b: list[Any], g: int = g) -> None:
            if hbm_flip and g == 1:
                b[2][1234] ^= 1 << 7  # one cell, one bit

        row = node.hbm_pass(torch, bufs, scratch, 1, g, free=1 << 20, chunk=1 << 18, between=flip)
        row["t"] = 600.0
        hbm.append(row)
    return node.assemble(
        fake, handles, rates, start=0.0, ended=sim.now(), interval_s=1.0, sampler=True,
        gemm={"n": 8192, "dtype": "bfloat16"}, series=series,
        counters={"before": before, "after": after}, xids_new=new_xids, hbm=hbm, errors=[],
        device="cuda", versions={"torch": "fake"},
    )  # fmt: skip
