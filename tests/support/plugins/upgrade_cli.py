"""What more than one test module needs from the old test_upgrade_cli.py:
tests/integration/test_upgrade_cli.py, tests/unit/test_upgrade_cli.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rackcert.core.runs import RunDir
from rackcert.core.spec_loader import load_spec
from rackcert.core.stage_records import ValidateData
from tests.support.spec_helpers import LAB


@pytest.fixture
def certified(tmp_path: Path) -> Path:
    loaded = load_spec(LAB)
    run = RunDir.create(tmp_path / "runs", "lab", loaded.sha256, loaded.text)
    run.write_stage("validate", ValidateData())
    run.write_stage("report", {"verdict": "PASS"})
    return tmp_path / "runs"


def new_spec(tmp_path: Path, driver: str, esxi: str | None = "7.0.3u") -> Path:
    data = yaml.safe_load(LAB.read_text())
    data["guest"]["nvidia_driver"] = driver
    if esxi:
        for host in data["hosts"]:
            host["esxi_version"] = esxi
    path = tmp_path / "new.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
