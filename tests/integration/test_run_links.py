"""Symbolic links in a run directory reach nothing outside it (issue "Hardening, second
round", item 5).

A run directory may come from elsewhere. Planted links made `--run DIR` overwrite their
targets (pytest.log, the inventory, extra vars, launch logs) and made the manifest publish
the sha256 of the file behind them (a password file). A run with a link leaving it is
refused in one line, before anything is written; a link inside the run is hashed as a link.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from rackcert.core.errors import RecordError
from rackcert.core.runs import RunDir
from tests.support.plugins.report import write_run


def test_a_run_with_a_link_leaving_it_is_refused_and_its_target_untouched(tmp_path):
    run = write_run(tmp_path / "runs", stages=("plan", "validate"))
    victim = tmp_path / "victim.txt"
    victim.write_text("the operator's file\n")
    log = run.path / "artifacts" / "validate" / "pytest.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.symlink_to(victim)
    with pytest.raises(RecordError, match=r"pytest.log is a symbolic link to .*outside the run"):
        RunDir.open(run.path)
    done = subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "report", str(run.path), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "outside the run; refusing the run" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert victim.read_text() == "the operator's file\n"
    assert not (run.path / "MANIFEST.sha256").exists()
