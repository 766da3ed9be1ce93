"""What more than one test module needs from the old test_bench_declare.py:
tests/integration/test_bench_declare.py, tests/unit/test_bench_declare.py.
"""

from __future__ import annotations

from validation.bench.options import Engine

CPU = Engine("torch", "cpu", "gloo")
