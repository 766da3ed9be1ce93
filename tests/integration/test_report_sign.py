"""`report sign` / `report verify --key`: an SSH signature over the manifest, outside it.

A recomputed manifest passes plain `verify` (that is the gap); with --key it fails,
because the signature no longer matches. Real ssh-keygen -Y sign / -Y verify.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rackcert.report.build import build_report
from rackcert.report.manifest import write_manifest
from tests.support.plugins.report import write_run


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rackcert.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        timeout=120,
    )


def _key(path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sign")
    run = write_run(tmp / "runs")
    build_report(run, formats=("json",))
    _key(tmp / "auditor")
    _key(tmp / "other")
    done = _cli("report", "sign", str(run.path), "--key", str(tmp / "auditor"))
    assert done.returncode == 0, done.stdout + done.stderr
    return run, tmp


def test_sign_then_verify_with_the_public_key(signed):
    run, tmp = signed
    assert (run.path / "MANIFEST.sha256.sig").is_file()
    done = _cli("report", "verify", str(run.path), "--key", str(tmp / "auditor.pub"), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout)
    fingerprint = subprocess.run(
        ["ssh-keygen", "-lf", str(tmp / "auditor.pub")], capture_output=True, text=True
    ).stdout.split()[1]
    assert out["ok"] and out["signed_by"].startswith("Good") and fingerprint in out["signed_by"]
    # The signature sits outside the manifest: plain verify still passes.
    assert _cli("report", "verify", str(run.path)).returncode == 0


def test_another_key_is_refused(signed):
    run, tmp = signed
    done = _cli("report", "verify", str(run.path), "--key", str(tmp / "other.pub"))
    assert done.returncode != 0 and "does not verify" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_recomputed_manifest_fails_the_signature(tmp_path):
    run = write_run(tmp_path / "runs")
    build_report(run, formats=("json",))
    _key(tmp_path / "k")
    assert _cli("report", "sign", str(run.path), "--key", str(tmp_path / "k")).returncode == 0
    record = json.loads((run.path / "report.json").read_text())
    record["data"]["verdict"] = "PASS" if record["data"]["verdict"] != "PASS" else "FAIL"
    (run.path / "report.json").write_text(json.dumps(record))
    write_manifest(run.path)  # what anyone who can write the run can do
    assert _cli("report", "verify", str(run.path)).returncode == 0  # the manifest alone: fooled
    done = _cli("report", "verify", str(run.path), "--key", str(tmp_path / "k.pub"))
    assert done.returncode != 0 and "does not verify" in done.stderr


def test_unsigned_run_and_changed_run(tmp_path):
    run = write_run(tmp_path / "runs")
    build_report(run, formats=("json",))
    _key(tmp_path / "k")
    done = _cli("report", "verify", str(run.path), "--key", str(tmp_path / "k.pub"))
    assert done.returncode != 0 and "not signed" in done.stderr
    (run.path / "facts.json").write_text("{}")
    done = _cli("report", "sign", str(run.path), "--key", str(tmp_path / "k"))
    assert done.returncode != 0 and "refusing to sign a changed run" in done.stderr
    assert not (run.path / "MANIFEST.sha256.sig").exists()


def test_a_signature_is_bound_to_its_rack_and_run(signed, tmp_path):
    """A signed run copied to a later timestamp (listed as the newest) no longer verifies."""
    import shutil

    run, tmp = signed
    done = _cli("report", "verify", str(run.path), "--key", str(tmp / "auditor.pub"))
    assert done.returncode == 0, done.stderr
    assert f"signed: rack {run.path.parent.name}, run {run.path.name}, MANIFEST.sha256" in (
        " ".join(done.stdout.split())
    )
    later = tmp_path / "runs" / run.path.parent.name / "29991231T000000.000000Z"
    shutil.copytree(run.path, later)
    done = _cli("report", "verify", str(later), "--key", str(tmp / "auditor.pub"))
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1
    assert f"it was made for rack {run.path.parent.name}, run {run.path.name}" in done.stderr
    other_rack = tmp_path / "runs2" / "another-rack" / run.path.name
    shutil.copytree(run.path, other_rack)
    done = _cli("report", "verify", str(other_rack), "--key", str(tmp / "auditor.pub"))
    assert done.returncode == 1 and "a signed run copied or renamed" in done.stderr
