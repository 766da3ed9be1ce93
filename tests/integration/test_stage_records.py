"""Stage records: one model per stage, published schemas, write-through, one spec per run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rackcert.core.runs import RunDir
from rackcert.core.spec_loader import load_spec
from tests.support.stage_records import LAB, ROOT


def test_schema_cli_prints_each_stage_and_refuses_an_unknown_one() -> None:
    env_cmd = [sys.executable, "-m", "rackcert.cli", "report", "schema", "--stage"]
    ok = subprocess.run([*env_cmd, "bench"], capture_output=True, text=True, cwd=ROOT, check=False)
    assert ok.returncode == 0 and json.loads(ok.stdout)["title"] == "BenchRecord"
    bad = subprocess.run([*env_cmd, "nope"], capture_output=True, text=True, cwd=ROOT, check=False)
    assert bad.returncode == 2 and bad.stderr.startswith("error: --stage 'nope'")


def test_stage_with_run_of_another_spec_is_one_error_line(tmp_path: Path) -> None:
    lab = load_spec(LAB)
    run = RunDir.create(tmp_path, "lab", lab.sha256, lab.text)
    edited = tmp_path / "lab-edited.yaml"
    edited.write_text(lab.text.replace("mtu: 9000", "mtu: 1500"))
    assert edited.read_text() != lab.text
    done = subprocess.run(
        # --local: the lab's VMs need not be up (else "the lab is not up" comes first)
        [sys.executable, "-m", "rackcert.cli", "validate", str(edited), "--local",
         "--run", str(run.path)],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().endswith(
        "another version of the spec (sha256 differs); start a new run instead"
    )
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (run.path / "validate.json").exists()
