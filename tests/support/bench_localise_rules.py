"""What more than one test module needs from the old test_bench_localise_rules.py:
tests/integration/test_bench_localise_rules.py, tests/unit/test_bench_localise_rules.py.
"""

from __future__ import annotations

from validation.bench.localisation import findings

RULES = findings.rules(0.7, 0.8, 0.2, "the lab's declared line rate")


def node_record(name: str, gemm: float, smi: list | None = None) -> dict:
    return {
        "node": name,
        "units": [{"unit": "cpu", "pci": None, "gemm_gflops": gemm}],
        "smi": smi or [],
        "allreduce": None,
        "error": None,
    }
