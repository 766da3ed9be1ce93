"""The validate suite's pytest cases report a check's own line: a failed case its reason and
fix, a skipped case its reason, no traceback (pytest's traceback formatting was the biggest
cost of a failing node's cases; issue "Fleet scale", item 2).

The suite runs here as `rackcert validate` starts it, on this machine (local://), with no
GPU tool on the PATH: gpu.count fails ("nvidia-smi not found"), gpu.nvlink.active does not
apply (no NVLink pair expected) and node.reachable passes.
"""

from __future__ import annotations

import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from validation.expect import NodeExpect
from validation.gather import Job, Target
from validation.runner import _suite_cmd

ROOT = Path(__file__).resolve().parents[2]
CHECKS = ["node.reachable", "gpu.count", "gpu.nvlink.active"]


def test_failed_and_skipped_cases_carry_the_checks_line_without_a_traceback(tmp_path):
    expect = NodeExpect(node="n1", address="127.0.0.1", gpus=1, os="")
    job = Job(targets=[Target(expect=expect)], checks=CHECKS, events=str(tmp_path / "ev.jsonl"))
    job_path = tmp_path / "job.json"
    job_path.write_text(job.model_dump_json())
    empty = tmp_path / "no-tools"
    empty.mkdir()
    junit = tmp_path / "pytest.xml"
    cmd = [*_suite_cmd(job_path, tmp_path), "-rfs", "--tb=long", f"--junitxml={junit}"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
           "PATH": f"{empty}:/usr/bin:/bin", "COLUMNS": "300"}  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=False)
    out = done.stdout + done.stderr

    assert done.returncode == 1, out
    assert "warning" not in done.stdout.strip().splitlines()[-1], out  # e.g. a deprecated fixture
    failed = [ln for ln in out.splitlines() if ln.startswith("FAILED") and "gpu.count" in ln]
    assert failed and "gpu.count on n1: nvidia-smi not found (fix: " in failed[0], out
    skipped = [ln for ln in out.splitlines() if ln.startswith("SKIPPED")]
    assert any("test_checks.py" in ln and "no NVLink-bridged pair" in ln for ln in skipped), out
    # even with --tb=long: the check's line, not test_check's source and frames
    assert "def test_check" not in out and "\nE   " not in out, out
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    failure = cases["test_check[n1::gpu.count]"].find("failure")
    assert failure is not None and "nvidia-smi not found" in failure.get("message", "")
    skip = cases["test_check[n1::gpu.nvlink.active]"].find("skipped")
    assert skip is not None and skip.get("message")
    assert not list(cases["test_check[n1::node.reachable]"])  # passed: no child element
