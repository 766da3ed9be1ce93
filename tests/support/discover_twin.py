"""What more than one test module needs from the old test_discover_twin.py:
tests/integration/test_discover_nodes.py, tests/integration/test_discover_twin.py.
"""

from __future__ import annotations

USER = "administrator@vsphere.local"
