"""Storage random-read benchmark on temp directories: real threads, real preads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.bench_storage import QUICK
from validation.bench.node import storage


def test_missing_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        storage.run(tmp_path / "nope", QUICK, allow_synthetic=True)
