"""Storage random-read benchmark on temp directories: real threads, real preads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.bench_storage import QUICK
from validation.bench.node import storage

ROOT = Path(__file__).resolve().parents[2]


def test_reads_existing_files_without_creating_any(tmp_path: Path) -> None:
    for i in range(3):
        (tmp_path / f"f{i}").write_bytes(os.urandom(32 << 10))
    out = storage.run(tmp_path, QUICK, allow_synthetic=False)
    assert out["synthetic"] is False and out["files"] == 3
    assert out["reads"] > 0 and out["errors"] == 0
    assert out["bytes_read"] == out["reads"] * 4096
    assert out["throughput_mb_s"] == pytest.approx(out["bytes_read"] / out["duration_s"] / 1e6)
    lat = out["latency_ms"]
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p99.9"] <= lat["max"]
    assert not (tmp_path / "rackcert-synthetic").exists()


def test_empty_directory_gets_synthetic_files_only_when_allowed(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="create_synthetic_data"):
        storage.run(tmp_path, QUICK, allow_synthetic=False)
    out = storage.run(tmp_path, QUICK, allow_synthetic=True)
    assert out["synthetic"] is True and out["files"] == 3 and out["reads"] > 0
    shards = sorted((tmp_path / "rackcert-synthetic").iterdir())
    assert [p.stat().st_size for p in shards] == [64 << 10] * 3


def test_small_files_are_read_whole(tmp_path: Path) -> None:
    (tmp_path / "tiny").write_bytes(b"x" * 100)
    out = storage.run(tmp_path, QUICK, allow_synthetic=False)
    assert out["bytes_read"] == out["reads"] * 100


def test_command_line_prints_one_result_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "validation.bench.node.storage", str(tmp_path), "--quick",
         "--synthetic", "--duration", "0.2"],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.splitlines()
    assert line.startswith(storage.MARKER)
    assert json.loads(line[len(storage.MARKER) :])["reads"] > 0
    bad = subprocess.run(
        [sys.executable, "-m", "validation.bench.node.storage", str(tmp_path / "none")],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert bad.returncode == 2 and "does not exist" in bad.stderr
