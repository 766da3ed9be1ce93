"""The run a roll starts from (issue 52, item 4): of this rack, validated, and certified, or
the operator says otherwise and the record and report say so.

Before, `--certified-run` took any directory: another rack's run, one with no validate.json,
one whose verdict was FAIL, and upgrade.json did not say the start was not certified.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rackcert.cli import main
from rackcert.core.results import CheckResult, Status
from rackcert.core.runs import RunDir
from rackcert.core.spec_loader import load_spec
from rackcert.core.stage_records import ValidateData
from rackcert.upgrade.budget import Budget
from rackcert.upgrade.plan import PlanOptions, build_plan
from rackcert.upgrade.start import read_start
from tests.support.spec_helpers import LAB
from tests.support.upgrade_helpers import four_node, new_run, roll, spec_of, upgraded, world_for

pytestmark = pytest.mark.unit

FAILING = [
    CheckResult(id="gpu.count", node="lab-node1", status=Status.failed, reason="no GPU"),
    CheckResult(id="ofed.version", node="lab-node2", status=Status.error, reason="no ofed_info"),
    CheckResult(id="node.reachable", node="lab-node1", status=Status.passed),
]


def _run(root: Path, rack: str = "lab", *, validate: bool = True, verdict: str | None = "PASS"):
    loaded = load_spec(LAB)
    run = RunDir.create(root, rack, loaded.sha256, loaded.text)
    if validate:
        run.write_stage("validate", ValidateData(results=FAILING if verdict != "PASS" else []))
    if verdict is not None:
        run.write_stage("report", {"verdict": verdict})
    return run


def _new_spec(tmp_path: Path) -> Path:
    data = yaml.safe_load(LAB.read_text())
    data["guest"]["nvidia_driver"] = "470.141.03"
    path = tmp_path / "new.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _plan(tmp_path, run, *extra):
    args = ["upgrade", str(_new_spec(tmp_path)), "--plan", "--runs-dir", str(tmp_path / "runs")]
    return main([*args, "--certified-run", str(run.path), *extra])


def test_a_run_of_another_rack_is_refused_in_one_line(tmp_path, capsys):
    run = _run(tmp_path / "runs", "other")
    assert _plan(tmp_path, run) == 2
    err = capsys.readouterr().err
    assert "a run of rack 'other', not 'lab'" in err and err.count("\n") == 1


def test_a_run_without_a_validate_record_is_refused(tmp_path, capsys):
    run = _run(tmp_path / "runs", validate=False)
    assert _plan(tmp_path, run) == 2
    assert "no validate record (validate.json)" in capsys.readouterr().err


@pytest.mark.parametrize("verdict", ["FAIL", "INCOMPLETE", None])
def test_a_start_that_is_not_certified_is_refused_unless_allowed(tmp_path, capsys, verdict):
    run = _run(tmp_path / "runs", verdict=verdict)
    assert _plan(tmp_path, run) == 2
    err = capsys.readouterr().err
    word = verdict or "none"
    assert f"run {run.path.name} is not certified, verdict {word}" in err
    assert "lab-node1: gpu.count fail, lab-node2: ofed.version error" in err
    assert "--allow-uncertified-start" in err and "Traceback" not in err
    assert _plan(tmp_path, run, "--allow-uncertified-start") == 0
    out = capsys.readouterr().out
    assert f"verdict {word}; failing: lab-node1: gpu.count fail" in out
    assert "(allowed: --allow-uncertified-start)" in out


def test_an_allowed_uncertified_start_is_in_the_record_and_the_report(tmp_path):
    from rackcert.report.assemble import assemble

    start_run = _run(tmp_path / "starts", verdict="FAIL")
    start = read_start(start_run, "lab")
    data = four_node(hosts=1)
    before, after = spec_of(data), spec_of(upgraded(data, esxi=None))
    world = world_for(before)
    for allowed in (False, True):
        plan = build_plan(
            before,
            after,
            PlanOptions(Budget.parse("1"), allow_uncertified=True, allow_uncertified_start=allowed),
            certified_run=start.run,
            reference=None,
            matrix_where="validation/certified",
            start=start,
        )
        assert bool(plan.blocking()) is not allowed
    run = new_run(tmp_path, upgraded(data, esxi=None))
    out = roll(plan, run, world).run()
    assert out.status == "done"
    record = json.loads((run.path / "upgrade.json").read_text())["data"]
    assert record["start_verdict"] == "FAIL" and record["allow_uncertified_start"] is True
    assert record["start_failing"] == ["lab-node1: gpu.count fail", "lab-node2: ofed.version error"]
    status = assemble(RunDir.open(run.path)).upgrade_status
    assert "started from a run that is not certified (verdict FAIL" in status
    assert "failing lab-node1: gpu.count fail, lab-node2: ofed.version error" in status
