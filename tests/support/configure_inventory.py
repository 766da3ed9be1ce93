"""What more than one test module needs from the old test_configure_inventory.py:
tests/integration/test_configure_inventory.py, tests/unit/test_configure_inventory.py.
"""

from __future__ import annotations

from pathlib import Path

LAB = Path("inventories/lab.yaml")
