"""What more than one test module needs from the old test_bench_verdict.py:
tests/integration/test_bench_verdict.py, tests/unit/test_bench_verdict.py.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "inventories" / "lab.yaml"
