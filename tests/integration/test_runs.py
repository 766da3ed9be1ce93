"""Run records: atomic stage files, crash safety, listing, and no secret in any record."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from rackcert.core.errors import RecordError
from rackcert.core.runs import RunDir, atomic_write_json, list_runs
from rackcert.core.spec_loader import load_spec
from tests.support.spec_helpers import LAB


def test_list_runs_sees_stages_and_verdict(run, tmp_path):
    run.write_stage("plan", {"actions": []})
    run.write_stage("report", {"verdict": "PASS"})
    runs = list_runs(tmp_path / "runs")
    assert len(runs) == 1
    assert runs[0].statuses == {"plan": "ok", "report": "ok"}
    assert runs[0].verdict == "PASS"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rackcert.cli",
            "runs",
            "list",
            "--json",
            "--runs-dir",
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    listed = json.loads(out.stdout)
    assert listed[0]["stages"] == {"plan": "ok", "report": "ok"}


CRASHER = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from rackcert.core import runs
    target = Path(sys.argv[1])
    real_replace = os.replace
    def crash(*args, **kwargs):
        os._exit(9)  # the process dies after writing the temp file, before the rename
    runs.os.replace = crash
    runs.atomic_write_json(target, {"version": "new", "blob": "x" * 1_000_000})
    """
)


def test_crash_mid_write_leaves_the_old_record(tmp_path):
    target = tmp_path / "validate.json"
    atomic_write_json(target, {"version": "old"})
    proc = subprocess.run([sys.executable, "-c", CRASHER, str(target)])
    assert proc.returncode == 9
    assert json.loads(target.read_text()) == {"version": "old"}
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "validate.json"]
    assert all(name.endswith(".tmp") and name.startswith(".") for name in leftovers)


@pytest.fixture
def small_mount(tmp_path):
    """A real tmpfs of 64 KiB (root only: CI runs as root), unmounted afterwards."""
    mount_point = tmp_path / "mnt"
    mount_point.mkdir()

    def mount(options: str):
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size=64k,{options}", "tmpfs", str(mount_point)],
            check=True,
        )
        return mount_point

    yield mount
    subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_full_filesystem_keeps_the_old_record(small_mount):
    mnt = small_mount("rw")
    target = mnt / "validate.json"
    atomic_write_json(target, {"version": "old"})
    with pytest.raises(RecordError, match="No space left on device") as info:
        atomic_write_json(target, {"version": "new", "blob": "x" * 200_000})
    assert "\n" not in str(info.value)
    assert json.loads(target.read_text()) == {"version": "old"}
    assert sorted(p.name for p in mnt.iterdir()) == ["validate.json"]


def test_read_only_filesystem_is_one_clear_error(small_mount, tmp_path):
    mnt = small_mount("ro")
    loaded = load_spec(LAB)
    with pytest.raises(RecordError, match="Read-only file system"):
        RunDir.create(mnt / "runs", "lab", loaded.sha256, loaded.text)
    out = subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "runs", "list", "--runs-dir", str(mnt / "runs")],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0 and "no runs" in out.stdout
