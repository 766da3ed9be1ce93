"""Run records: atomic stage files, crash safety, listing, and no secret in any record."""

from __future__ import annotations

import json

import pytest

from rackcert.core.errors import RecordError
from rackcert.core.runs import SCHEMA_VERSION, RunDir, atomic_write_json
from rackcert.core.secrets import MASK, REDACTOR, resolve_secret
from rackcert.core.spec_loader import load_spec
from tests.support.spec_helpers import LAB


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
