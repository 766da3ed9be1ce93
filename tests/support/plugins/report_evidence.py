"""What more than one test module needs from the old test_report_evidence.py:
tests/integration/test_report_evidence.py, tests/unit/test_report_evidence.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rackcert.core.runs import RunDir
from rackcert.core.spec_loader import load_spec

REPO = Path(__file__).resolve().parents[3]
EVIDENCE = REPO / "docs" / "evidence"


@pytest.fixture
def h200_run(tmp_path):
    for name in ("h200-validate.json", "h200-bench.json"):
        if not (EVIDENCE / name).is_file():
            pytest.fail(f"docs/evidence/{name} is missing: the report test reads the real record")
    loaded = load_spec(REPO / "inventories" / "h200-local.yaml")
    run = RunDir.create(tmp_path / "runs", loaded.spec.metadata.name, loaded.sha256, loaded.text)
    shutil.copy(EVIDENCE / "h200-validate.json", run.path / "validate.json")
    bench = json.loads((EVIDENCE / "h200-bench.json").read_text())
    # The bench evidence was recorded against the R750xa spec; file it under this run's spec.
    bench["spec_sha256"] = loaded.sha256
    (run.path / "bench.json").write_text(json.dumps(bench))
    return run


REF = "dell-r750xa-a100-esxi703"
