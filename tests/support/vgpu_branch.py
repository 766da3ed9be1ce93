"""What more than one test module needs from the old test_vgpu_branch.py:
tests/integration/test_vgpu_branch.py, tests/unit/test_vgpu_branch.py.
"""

from __future__ import annotations

from rackcert.core.paths import inventories_dir

HGX = inventories_dir() / "hgx-h200-4node.yaml"
R550 = "550.127.06-1OEM.800.1.0.20613240"  # vGPU 17.4's manager, the twin's ESXi 8.0 hosts
R535 = "535.154.02-1OEM.702.0.0.17630552"  # vGPU 16.3's manager, the twin's ESXi 7.0 hosts
