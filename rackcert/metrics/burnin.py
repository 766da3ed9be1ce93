"""`rackcert_burnin_*`: a burn-in's watch as Prometheus metrics (node_exporter's textfile).

Why: a four-hour acceptance run is watched from the site's dashboards like any other job;
the families say the verdict, each finding (by rule, node and part) and, per GPU, what the
sampler saw at its worst (peak power and temperature, the last window's GEMM rate against
the first). Label names follow families.py (DCGM exporter's `gpu`, `pci_bus_id`).

    write_burnin_metrics(Path("/var/lib/node_exporter/rackcert-burnin.prom"), record)
"""

from __future__ import annotations

from pathlib import Path

from rackcert.core.stage_records import BurninRecord
from rackcert.metrics.families import Family
from rackcert.metrics.textfile import write_textfile


def burnin_families(record: BurninRecord) -> list[Family]:
    spec = record.rack
    data = record.data
    verdict = Family("burnin_pass", "1 when the burn-in named no part, else 0", ("spec",))
    verdict.set(1.0 if data.verdict == "PASS" else 0.0, spec=spec)
    duration = Family("burnin_duration_seconds", "How long the loads ran", ("spec",))
    duration.set(data.duration_s, spec=spec)
    findings = Family(
        "burnin_finding", "A part the burn-in named; always 1", ("spec", "rule", "node", "part")
    )
    for f in data.findings:
        findings.set(1.0, spec=spec, rule=f.rule, node=f.node, part=f.part)
    count = Family("burnin_findings", "How many parts the burn-in named", ("spec",))
    count.set(float(len(data.findings)), spec=spec)
    ids = ("spec", "node", "gpu", "serial", "pci_bus_id")
    power = Family("burnin_gpu_power_max_watts", "Peak power the sampler saw", ids)
    limit = Family("burnin_gpu_power_limit_watts", "The GPU's enforced power limit", ids)
    temp = Family("burnin_gpu_temperature_max_celsius", "Peak GPU temperature seen", ids)
    first = Family("burnin_gpu_gemm_first_tflops", "GEMM TFLOP/s, first window", ids)
    last = Family("burnin_gpu_gemm_last_tflops", "GEMM TFLOP/s, last window", ids)
    for g in data.gpus:
        where = {"spec": spec, "node": g.node, "gpu": g.index, "serial": g.serial or "",
                 "pci_bus_id": g.pci or ""}  # fmt: skip
        for fam, value in ((power, g.power_max_w), (limit, g.power_limit_w),
                           (temp, g.temp_max_c), (first, g.first_tflops),
                           (last, g.last_tflops)):  # fmt: skip
            if value is not None:
                fam.set(float(value), **where)
    return [verdict, duration, findings, count, power, limit, temp, first, last]


def write_burnin_metrics(path: Path, record: BurninRecord) -> int:
    """Write the families to `path` atomically; how many families were written."""
    return write_textfile(path, burnin_families(record))
