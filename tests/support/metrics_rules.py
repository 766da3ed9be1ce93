"""What more than one test module needs from the old test_metrics_rules.py:
tests/integration/test_metrics_rules.py, tests/unit/test_metrics_rules.py.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "monitoring" / "prometheus"
