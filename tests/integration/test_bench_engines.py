"""The vendors' engines of the bench: nccl-tests, fio, perftest's ib_write_bw and DCGM.

Parsers run on output captured from real runs where one could be made: all_reduce_perf
on one H200 (nccl-tests 2.19.6, tests/support/fixtures/bench/all_reduce_perf-h200-1gpu.txt; and
one run with `-J`: its JSON file and its stdout, all_reduce_perf-h200-1gpu-json.*, the
JSON's `env` list, the process's environment, emptied and its binary path shortened),
fio 3.33 here with rackcert's own command line, ib_write_bw here without an RDMA device.
No RDMA device and no DCGM exist on any machine these tests ran on: the ib_write_bw
table and the DCGM documents below follow the layouts perftest and DCGM document
(perftest's README; DCGM's nvvs JsonOutput format comment), and say so.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rackcert.core.runs import RunDir
from tests.support.bench_engines import FIX
from validation.bench.node import storage
from validation.bench.options import BenchOptions, Engine, Point
from validation.bench.units import nccl_tests as nccltests
from validation.bench.units.nccl_tests import run_nccl_tests


def _json_all_reduce_perf(path: Path) -> Path:
    """A GPU-less stand-in for an all_reduce_perf that has -J: `-h` prints a usage naming
    --output_file (nccl-tests 2.19.6's usage line), a run writes the captured JSON to the
    file -J names and prints the captured stdout of that same run."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = -h ]; then echo "USAGE: all_reduce_perf"; echo "\t[-J,--output_file'
        " <file> write output to filepath, if accessible. Infer type from suffix (only json"
        ' supported presently.)]"; exit 0; fi\n'
        'while [ $# -gt 0 ]; do [ "$1" = -J ] && out=$2; shift; done\n'
        f'cp {FIX / "all_reduce_perf-h200-1gpu-json.json"} "$out"\n'
        f"exec /bin/cat {FIX / 'all_reduce_perf-h200-1gpu-json.txt'}\n"
    )
    path.chmod(0o755)
    return path


def test_nccl_tests_asks_for_json_when_the_binary_has_it_and_reads_text_otherwise(tmp_path):
    with_json = _json_all_reduce_perf(tmp_path / "new/all_reduce_perf")
    assert nccltests.supports_json(str(with_json))
    out = nccltests.run_local(str(with_json), 1, 1 << 30, tmp_path / "new.log")
    assert out["format"] == "json" and out["command"][-2] == "-J"
    assert len(out["points"]) == 28 and out["correct"] and out["version"] == "2.19.6"
    kept = json.loads((tmp_path / "new.json").read_text())
    assert "env" not in kept and kept["results"]  # the environment is never recorded
    older = _stand_in_all_reduce_perf(tmp_path / "old/all_reduce_perf")  # no -J in its usage
    assert not nccltests.supports_json(str(older))
    out = nccltests.run_local(str(older), 1, 1 << 30, tmp_path / "old.log")
    assert out["format"] == "text" and "-J" not in out["command"] and len(out["points"]) == 28


def test_fio_is_the_engine_when_installed_and_pread_the_fallback(tmp_path: Path) -> None:
    cfg = storage.StorageConfig(readers=2, block_bytes=4096, duration_s=0.3, synthetic_files=2,
                                synthetic_file_bytes=64 << 10)  # fmt: skip
    fio = storage.run(tmp_path, cfg, allow_synthetic=True, engine="fio")
    assert fio["engine"].startswith("fio-") and fio["reads"] > 0 and fio["errors"] == 0
    assert "--readonly" in storage.fio_command("fio", tmp_path, cfg)
    assert fio["synthetic"] is True and fio["files"] == 2
    pread = storage.run(tmp_path, cfg, allow_synthetic=True, engine="pread")
    assert pread["engine"] == "pread" and pread["reads"] > 0
    assert set(fio) - {"engine"} >= set(pread) - {"engine"}  # same figures either way


def test_a_failing_fio_falls_back_to_pread_and_says_why(tmp_path: Path, monkeypatch) -> None:
    bindir = tmp_path / "bin"  # a stand-in fio that fails, to exercise the fallback
    bindir.mkdir()
    (bindir / "fio").write_text("#!/bin/sh\necho 'fio: failed to open directory' >&2\nexit 1\n")
    (bindir / "fio").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    data = tmp_path / "data"
    data.mkdir()
    (data / "f").write_bytes(os.urandom(16 << 10))
    cfg = storage.StorageConfig(readers=2, block_bytes=4096, duration_s=0.2)
    out = storage.run(data, cfg, allow_synthetic=False)
    assert out["engine"] == "pread" and out["reads"] > 0
    assert "fio exit 1: fio: failed to open directory" in out["fio_error"]
    with pytest.raises(ValueError, match="storage engine fio: fio exit 1"):
        storage.run(data, cfg, allow_synthetic=False, engine="fio")


def _stand_in_all_reduce_perf(path: Path) -> Path:
    """A GPU-less stand-in for all_reduce_perf: prints the real H200 run's captured output."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\nexec /bin/cat {FIX / 'all_reduce_perf-h200-1gpu.txt'}\n")
    path.chmod(0o755)
    return path


def test_nccl_tests_runs_the_roles_install_and_records_which_binary(tmp_path, monkeypatch):
    """Before: only --nccl-tests or PATH; the binary configure's role installed was never run."""
    run = RunDir(tmp_path / "run")
    cuda, pts = Engine("torch", "cuda", "nccl"), [Point(1, 1, 1)]
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    installed = _stand_in_all_reduce_perf(tmp_path / "opt/nccl-tests/bin/all_reduce_perf")
    out = run_nccl_tests(BenchOptions(local=True, quick=True), cuda, run, pts, installed)
    assert out["binary"] == str(installed) and out["found_by"] == "configure's nccl_tests role"
    assert out["command"][0] == str(installed) and out["version"] == "2.19.6"
    assert len(out["points"]) == 28 and out["correct"]
    # One on PATH wins (the role leaves it alone); --nccl-tests wins over both.
    on_path = _stand_in_all_reduce_perf(tmp_path / "bin/all_reduce_perf")
    monkeypatch.setenv("PATH", str(on_path.parent))
    assert nccltests.locate(None, installed) == {"binary": str(on_path), "found_by": "PATH"}
    given = _stand_in_all_reduce_perf(tmp_path / "given/all_reduce_perf")
    assert nccltests.locate(str(given), installed)["found_by"] == "--nccl-tests"
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    gone = run_nccl_tests(
        BenchOptions(local=True), cuda, run, pts, tmp_path / "none/all_reduce_perf"
    )
    assert gone["skipped"] and "on PATH or in" in gone["reason"]
