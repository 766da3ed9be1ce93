"""The bench verdict never says PASS for what was not judged (certification.required).

PASS needs every required check judged and none failed; a threshold that is 0 or absent
is "not judged"; a bench that judged nothing is INCOMPLETE; the committed H200 evidence is
what this code judges of its own figures (INCOMPLETE: one GPU judges neither the busbw
fraction nor the scaling efficiency that the 4-node spec requires).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from rackcert.core.runs import RunDir
from rackcert.report.assemble import assemble
from tests.support.bench_verdict import LAB, ROOT


def test_bench_skipping_everything_is_incomplete_and_says_why(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
    base = [sys.executable, "-m", "rackcert.cli", "bench", str(LAB), "--local"]
    base += ["--skip", "allreduce,resnet,storage", "--runs-dir", str(tmp_path)]
    base += ["--junit", str(tmp_path / "bench-junit.xml")]
    proc = subprocess.run(base, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    assert proc.returncode == 1, proc.stderr[-2000:]
    # JUnit agrees with the exit code: the required checks nobody judged are failures.
    suites = ET.parse(tmp_path / "bench-junit.xml").getroot()
    assert sum(int(s.get("failures", 0)) for s in suites) >= 1
    assert "required but not judged" in (tmp_path / "bench-junit.xml").read_text()
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "verdict: INCOMPLETE" in proc.stdout
    assert "not judged: allreduce.correct: allreduce not run" in proc.stdout
    record = json.loads(next(tmp_path.glob("*/*/bench.json")).read_text())
    assert record["status"] == "ok" and record["data"]["verdict"]["verdict"] == "INCOMPLETE"
    report = assemble(RunDir.open(next(tmp_path.glob("*/*"))))
    assert report.verdict.verdict == "INCOMPLETE"
