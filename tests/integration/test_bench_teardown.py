"""Teardown never fails finished work; the compile cache lives where the ranks can keep it.

Real processes: each launch below is a Python child that prints what a rank prints
(`RACKCERT_RESULT`, `RACKCERT_DONE`) and then ends the way a rank can end: cleanly, by
SIGABRT after its result (what Gloo's exit did to one rank of three in a fresh clone's
suite), or by SIGABRT before any result.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from validation.bench import launch

RESULT = {"backend": "gloo", "world_size": 2, "device": "cpu", "allreduce": {"points": []}}


def _rank(*lines: str, then: str = "") -> list[str]:
    body = "".join(f"print({line!r}, flush=True)\n" for line in lines)
    return [sys.executable, "-c", body + then]


def test_a_rank_that_aborts_after_all_reported_is_a_warning(tmp_path: Path) -> None:
    job = launch.here(
        "2 ranks",
        [_rank("RACKCERT_RESULT " + json.dumps(RESULT), "RACKCERT_DONE 1",
               then="import os; os.abort()\n")],
    )  # fmt: skip
    (out,) = launch.execute(job, tmp_path / "launch.log", timeout_s=60)
    assert out is not None and out["world_size"] == 2
    warning = out["exit_warning"]
    assert warning.startswith("every rank reported its figures, then rank(s) 0 exit -6")
    assert "the figures stand" in warning and "teardown finished on ranks [1]" in warning


def test_a_rank_that_aborts_before_the_result_fails_the_launch(tmp_path: Path) -> None:
    job = launch.here("2 ranks", [_rank("warming up", then="import os; os.abort()\n")])
    with pytest.raises(launch.LaunchError, match="failed \\(exit -6\\)"):
        launch.execute(job, tmp_path / "launch.log", timeout_s=60)


def test_a_clean_launch_has_no_warning(tmp_path: Path) -> None:
    job = launch.here("2 ranks", [_rank("RACKCERT_RESULT " + json.dumps(RESULT))])
    (out,) = launch.execute(job, tmp_path / "launch.log", timeout_s=60)
    assert out is not None and "exit_warning" not in out


def test_probes_and_helpers_stay_strict(tmp_path: Path) -> None:
    """execute_text (probes, storage, ib_write_bw) has no results to keep: a failure fails."""
    job = launch.here("probe", [_rank("RACKCERT_RESULT {}", then="raise SystemExit(3)\n")])
    with pytest.raises(launch.LaunchError, match="exit 3"):
        launch.execute_text(job, tmp_path / "probe.log", timeout_s=60)
