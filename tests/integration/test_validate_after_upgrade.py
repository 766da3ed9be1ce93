"""`rackcert validate` after an upgrade: compared with the rack's last certified run."""

from __future__ import annotations

import json

from rackcert.core.runs import RunDir, list_runs
from tests.support.validate_local import H200_SPEC, rackcert


def _validate(runs, tools):
    return rackcert(
        "validate", str(H200_SPEC), "--local", "--runs-dir", str(runs),
        "--check", "gpu", "--tool-path", tools, "--no-facts",
    )  # fmt: skip


def test_upgrade_is_diffed_against_the_last_certified_run(tmp_path, fake_gpu_tools):
    runs = tmp_path / "runs"
    first = _validate(runs, fake_gpu_tools({"h200-node1": {}}))
    assert first.returncode == 0, first.stderr
    assert "no certified (PASS) run of this rack yet" in first.stdout
    # The platform team certified that run (its report said PASS).
    certified = RunDir.open(list_runs(runs)[-1].path)
    certified.write_stage("report", {"verdict": "PASS", "reasons": []})

    same = _validate(runs, fake_gpu_tools({"h200-node1": {}}))
    assert same.returncode == 0, same.stderr
    assert f"compared with the last certified run {certified.path}" in same.stdout.replace("\n", "")
    assert "no regression" in same.stdout

    upgraded = _validate(runs, fake_gpu_tools({"h200-node1": {"driver": "585.10.01"}}))
    assert upgraded.returncode == 1
    out = upgraded.stdout
    assert "versions changed" in out and "585.10.01" in out
    assert "REGRESSION" in out and "gpu.driver" in out
    assert "Traceback" not in upgraded.stderr
    # validate wrote its record once; the comparison is the report layer's document, and
    # JUnit carries the regressions as one failing case (CI and the exit code agree).
    newest = RunDir.open(list_runs(runs)[-1].path)
    record = newest.read_record("validate")
    assert record.data.compared_with is None and record.data.regressions == []
    compared = json.loads((newest.path / "comparison.json").read_text())
    assert compared["compared_with"] == str(certified.path) and compared["regressions"]
    junit = (newest.artifacts("validate") / "junit.xml").read_text()
    assert 'name="validate.regressions"' in junit or "validate.regressions" in junit
