"""What more than one test module needs from the old test_import_graph.py:
tests/integration/test_import_graph.py, tests/unit/test_import_graph.py.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("rackcert", "provision", "validation")
