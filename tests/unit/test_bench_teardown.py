"""Teardown never fails finished work; the compile cache lives where the ranks can keep it.

Real processes: each launch below is a Python child that prints what a rank prints
(`RACKCERT_RESULT`, `RACKCERT_DONE`) and then ends the way a rank can end: cleanly, by
SIGABRT after its result (what Gloo's exit did to one rank of three in a fresh clone's
suite), or by SIGABRT before any result.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rackcert.core.paths import REPO_ROOT
from rackcert.core.runs import RunDir
from validation.bench import launch
from validation.bench.node import compilecache
from validation.bench.orchestrate import write_record


def test_torchruns_own_summary_names_the_rank_and_the_signal() -> None:
    summary = (
        "RACKCERT_RESULT {}\nRACKCERT_DONE 1\nRACKCERT_DONE 2\n"
        "Root Cause (first observed failure):\n"
        "[0]:\n  rank      : 0 (local_rank: 0)\n  exitcode  : -6 (pid: 32167)  (SIGABRT)\n"
        "  traceback : Signal 6 (SIGABRT) received by PID 32167\n"
    )
    warning = launch.exit_warning([summary], (0, 1), 3)
    assert "then rank(s) 0 exit -6 (SIGABRT) at exit" in warning


def test_the_cache_goes_under_the_environment_and_the_operators_choice_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    assert compilecache.default_dir("/opt/rackcert/venv/") == (
        "/opt/rackcert/venv/var/cache/rackcert/compile"
    )
    assert compilecache.use(None) is None
    where = tmp_path / "venv" / "var" / "cache"
    got = compilecache.use(str(where))
    assert got == {"dir": str(where), "from": "rackcert", "files_before": 0}
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(where)
    assert os.environ["TRITON_CACHE_DIR"] == str(where / "triton")
    (where / "fxgraph").mkdir()
    (where / "fxgraph" / "entry").write_text("x")
    assert compilecache.use(str(tmp_path / "elsewhere"))["files_before"] == 1  # env wins
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    got = compilecache.use(str(blocked / "cache"))
    assert got is not None and got["error"].startswith(("NotADirectoryError", "FileExistsError"))
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ  # nothing pointed at a broken place


def test_a_ranks_long_exit_output_is_cut_in_bench_json(tmp_path: Path) -> None:
    recorded = json.loads((REPO_ROOT / "docs/evidence/h200-bench.json").read_text())
    data = recorded["data"]
    data["launches"][0]["exit_warning"] = "rank 1 died: " + "x" * 50_000
    data["launches"][0]["commands"] = [["ssh", "--", "root@node1", "env " + "A=1 " * 500]]
    run = RunDir.create(tmp_path / "runs", recorded["rack"], recorded["spec_sha256"], "{}\n")
    record = write_record(run, data, "ok", None, recorded["started_at"])
    warning = record.data.launches[0].exit_warning or ""
    assert len(warning) < 1_000 and "more characters in artifacts/bench" in warning
    assert "x" * 50_000 not in (run.path / "bench.json").read_text()
    # The measured figures are untouched.
    assert record.data.launches[0].resnet == data["launches"][0]["resnet"]
    assert record.data.launches[0].commands == data["launches"][0]["commands"]  # ours, whole
