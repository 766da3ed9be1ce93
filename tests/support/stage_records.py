"""What more than one test module needs from the old test_stage_records.py:
tests/integration/test_e2e_bootstrap.py, tests/integration/test_stage_records.py,
tests/unit/test_stage_records.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from rackcert.core.stage_records import RECORDS

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas"
LAB = ROOT / "inventories" / "lab.yaml"


def validate_run_dir(run: Path) -> list[str]:
    """Every stage record in `run` against its checked-in JSON Schema; the stages seen."""
    seen = []
    for stage in RECORDS:
        path = run / f"{stage}.json"
        if path.is_file():
            schema = json.loads((SCHEMAS / f"{stage}.schema.json").read_text())
            jsonschema.validate(json.loads(path.read_text()), schema)
            seen.append(stage)
    return seen
