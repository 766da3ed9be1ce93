"""What more than one test module needs from the old test_report_record.py:
tests/integration/test_report_record.py, tests/unit/test_report_record.py.
"""

from __future__ import annotations

from pathlib import Path

SCHEMA = Path(__file__).resolve().parents[2] / "schemas" / "run.schema.json"
