"""Run records: atomic stage files, crash safety, listing, and no secret in any record."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from rackcert.core.errors import RecordError
from rackcert.core.runs import SCHEMA_VERSION, RunDir, atomic_write_json, list_runs
from rackcert.core.secrets import MASK, REDACTOR, resolve_secret
from rackcert.core.spec_loader import load_spec
from tests.spec_helpers import LAB


@pytest.fixture
def run(tmp_path):
    loaded = load_spec(LAB)
    return RunDir.create(tmp_path / "runs", loaded.spec.metadata.name, loaded.sha256, loaded.text)


def test_stage_record_carries_schema_and_digest(run):
    written = run.write_stage("validate", {"results": []}, status="failed", error="2 checks failed")
    record = json.loads((run.path / "validate.json").read_text())
    assert written.model_dump(mode="json") == record  # the stage gets back what the file holds
    assert record["schema_version"] == SCHEMA_VERSION
    assert record["spec_sha256"] == load_spec(LAB).sha256
    assert record["status"] == "failed" and record["error"] == "2 checks failed"
    assert run.stages() == ["validate"]
    assert (run.path / "spec.yaml").read_text() == LAB.read_text()
    assert run.path.parent.name == "lab"


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


def test_failed_serialisation_leaves_no_file(tmp_path):
    target = tmp_path / "x.json"
    with pytest.raises(ValueError):
        atomic_write_json(target, {"bad": float("nan")} | {"loop": None} | _circular())
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def _circular():
    node: dict = {}
    node["self"] = node
    return {"circular": node}


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


def test_unwritable_target_is_a_record_error(tmp_path):
    # A directory where the file should go: the rename fails like a read-only mount does.
    (tmp_path / "a.json").mkdir()
    with pytest.raises(RecordError, match="cannot write run record") as info:
        atomic_write_json(tmp_path / "a.json", {"k": 1})
    assert "\n" not in str(info.value)
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_resolved_secrets_never_reach_records(tmp_path, monkeypatch):
    monkeypatch.setenv("RACKCERT_TEST_SECRET", "s3cr3t-Value-42")
    secret = resolve_secret("RACKCERT_TEST_SECRET", None, "vcenter")
    target = tmp_path / "r.json"
    atomic_write_json(target, {"log": f"login with {secret} ok", "nested": [{secret: secret}]})
    text = target.read_text()
    assert secret not in text
    assert MASK in text
    assert REDACTOR.scrub(secret) == MASK


def test_missing_secret_is_an_input_error(tmp_path):
    from rackcert.core.errors import InputError

    with pytest.raises(InputError, match="RACKCERT_UNSET_VAR is not set"):
        resolve_secret("RACKCERT_UNSET_VAR", None, "vcenter")
    with pytest.raises(InputError, match="cannot read password file"):
        resolve_secret(None, str(tmp_path / "none"), "vcenter")


def test_open_rejects_non_run_directory(tmp_path):
    with pytest.raises(RecordError, match="not a rackcert run directory"):
        RunDir.open(tmp_path)
