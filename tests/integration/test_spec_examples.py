"""The shipped example specs load, round-trip, and validate against the published schema."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest
import yaml

from tests.support.spec_helpers import EXAMPLES, R750


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_schema_validates_examples(path):
    schema = json.loads(
        subprocess.run(
            [sys.executable, "-m", "rackcert.cli", "spec", "schema"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    jsonschema.validate(yaml.safe_load(path.read_text()), schema)


def test_spec_check_prints_summary():
    out = subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "spec", "check", str(R750)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "OK" in out.stdout and "16 GPUs" in out.stdout and "8 NVLink pairs" in out.stdout
    for host in ("esx01", "esx02", "esx03", "esx04"):
        assert host in out.stdout


def test_spec_check_json():
    out = subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "spec", "check", str(R750), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(out.stdout)
    assert data["ok"] is True
    assert data["totals"] == {"hosts": 4, "gpus": 16, "nvlink_pairs": 8, "vms": 9, "vm_gpus": 12}
