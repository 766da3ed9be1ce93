"""What more than one test module needs from the old test_metrics_rules.py:
tests/integration/test_metrics_rules.py, tests/unit/test_metrics_rules.py.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "monitoring" / "prometheus"


def shipped_alerts() -> set[str]:
    """The alert names monitoring/prometheus/rackcert.rules.yml holds, read from the file."""
    import yaml

    doc = yaml.safe_load((RULES / "rackcert.rules.yml").read_text())
    return {r["alert"] for g in doc["groups"] for r in g["rules"] if "alert" in r}


SHIPPED_ALERTS = shipped_alerts()
