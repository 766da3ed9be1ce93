"""The stage pipeline: order, stop on failure with a report anyway, and --resume."""

from __future__ import annotations

import pytest
from rich.console import Console

from rackcert.core.errors import RackcertError
from rackcert.core.runs import RunDir
from rackcert.core.spec_loader import load_spec
from rackcert.pipeline import Stage, completed, run_pipeline
from tests.support.spec_helpers import LAB


@pytest.fixture
def run(tmp_path):
    loaded = load_spec(LAB)
    return RunDir.create(tmp_path, "lab", loaded.sha256, loaded.text)


def _recording(name, calls, fail_times=0):
    state = {"left": fail_times}

    def stage(run: RunDir) -> None:
        calls.append(name)
        if state["left"]:
            state["left"] -= 1
            raise RackcertError(f"{name}: task ReconfigVM_Task failed: injected fault")
        run.write_stage(name, {})

    return Stage(name, stage)


def test_stops_at_the_failed_stage_and_still_reports(run):
    calls: list[str] = []
    stages = [
        _recording("plan", calls),
        _recording("provision", calls, fail_times=1),
        _recording("configure", calls),
    ]
    result = run_pipeline(
        stages, run, final=_recording("report", calls), console=Console(file=None, quiet=True)
    )
    assert calls == ["plan", "provision", "report"]
    assert result.failed == "provision" and "injected fault" in str(result.error)
    record = run.read_stage("provision")
    assert record["status"] == "failed" and "injected fault" in record["error"]
    assert completed(run) == {"plan", "report"}


def test_resume_continues_after_the_last_good_stage(run):
    calls: list[str] = []
    provision = _recording("provision", calls, fail_times=1)
    stages = [_recording("plan", calls), provision, _recording("configure", calls)]
    quiet = Console(quiet=True)
    run_pipeline(stages, run, console=quiet)
    calls.clear()
    result = run_pipeline(stages, run, resume=True, console=quiet)
    assert calls == ["provision", "configure"]
    assert result.ok and result.resumed == ["plan"]
    assert run.read_stage("provision")["status"] == "ok"
