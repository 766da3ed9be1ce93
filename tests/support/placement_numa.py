"""What more than one test module needs from the old test_placement_numa.py:
tests/integration/test_placement_numa.py, tests/unit/test_placement_numa.py.
"""

from __future__ import annotations

CROSSING = {"s1-pair", "s3-pair-a", "s3-pair-b"}
