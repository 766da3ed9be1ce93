"""What more than one test module needs from the old test_bench_engines.py:
tests/integration/test_bench_engines.py, tests/unit/test_bench_engines.py.
"""

from __future__ import annotations

from tests.support.paths import FIXTURES

FIX = FIXTURES / "bench"
