"""What more than one test module needs from the old test_vgpu_manager_install.py:
tests/integration/test_vgpu_manager_install.py, tests/unit/test_vgpu_manager_install.py.
"""

from __future__ import annotations

from rackcert.core.paths import inventories_dir

HGX = inventories_dir() / "hgx-h200-4node.yaml"
H2 = "hgx02.example.internal"
DEPOT = (
    "/vmfs/volumes/datastore1/NVD-AIE-800_ESXi_8.0.0_Driver_550.127.06-1OEM.800.1.0.20613240.zip"
)
# What NVIDIA's vGPU 17.4 bundle for ESXi 8.0 holds (hostsoftware.go cites the release notes).
MANAGER = {
    "name": "NVD-AIE-800_ESXi_8.0.0_Driver",
    "version": "550.127.06-1OEM.800.1.0.20613240",
    "vendor": "NVD",
    "acceptance_level": "VMwareAccepted",
}
