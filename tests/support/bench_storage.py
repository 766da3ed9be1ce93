"""What more than one test module needs from the old test_bench_storage.py:
tests/integration/test_bench_storage.py, tests/unit/test_bench_storage.py.
"""

from __future__ import annotations

from validation.bench.node import storage

QUICK = storage.StorageConfig(readers=4, block_bytes=4096, duration_s=0.3, synthetic_files=3,
                              synthetic_file_bytes=64 << 10)  # fmt: skip
