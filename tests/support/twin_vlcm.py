"""What more than one test module needs from the old test_twin_vlcm.py:
tests/integration/test_host_image.py, tests/integration/test_host_image_baselines.py,
tests/integration/test_twin_vlcm.py, tests/integration/test_upgrade_lab.py,
tests/integration/test_upgrade_twin.py.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.support.twin_judges import JUDGES_VENV

LAB = "inventories/lab.yaml"
H1, H2 = "lab-esx01.lab.internal", "lab-esx02.lab.internal"
OLD_BASE = "7.0.3-0.20.19193900"  # ESXi 7.0 U3c, what the lab's hosts run
# ESXi 7.0 U3d (build 19482537, 2022-03-29, ESXi release notes); NVIDIA vGPU 16.4's manager;
# NVIDIA's async ConnectX driver as a vLCM component replacing the inbox nmlx5 VIBs.
NEW_BASE = "7.0.3-0.35.19482537"
VGPU = "NVD-AIE_ESXi_7.0.2_Driver"
VGPU_NEW = "535.161.05-1OEM.702.0.0.17630552"
NMLX = "Mellanox-nmlx5"
NMLX_NEW = "4.23.0.66-1OEM.703.0.0.18434556"
VLCM = {
    "image_managed": True,
    "base_images": [
        {"version": NEW_BASE, "display_version": "7.0 U3d", "release_date": "2022-03-29"}
    ],
    "components": [
        {"name": VGPU, "version": VGPU_NEW, "vendor": "NVD", "display_version": "16.4"},
        {"name": NMLX, "version": NMLX_NEW, "vendor": "MEL", "vibs": ["nmlx5-core", "nmlx5-rdma"]},
    ],
}


def sdk(lab: Any, steps: list[dict[str, Any]], tmp: Path) -> list[dict[str, Any]]:
    """Run the SDK judge (tests/support/vlcm_sdk_judge.py) in the judges' environment."""
    python = JUDGES_VENV / "bin" / "python"
    assert python.is_file(), f"the vSphere judges are not installed ({JUDGES_VENV}): run .ci/setup"
    request = tmp / f"sdk-{time.monotonic_ns()}.json"
    request.write_text(
        json.dumps(
            {
                "server": f"127.0.0.1:{lab.twin.port}",
                "user": lab.spec.vcenter.user,
                "password_file": str(lab.twin.files.password_file),
                "ca_file": str(lab.twin.files.cert_file),
                "cluster": "cluster0",
                "steps": steps,
            }
        )
    )
    # The SDK's own TLS set-up (session.verify = the CA file); nothing inherited that would
    # override it (REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE).
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp)}
    script = Path(__file__).with_name("vlcm_sdk_judge.py")
    proc = subprocess.run(
        [str(python), str(script), str(request)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    answer: list[dict[str, Any]] = json.loads(proc.stdout)
    return answer


def hosts_by_name(si: Any) -> dict[str, Any]:
    from pyVmomi import vim

    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.HostSystem], True)
    try:
        return {h.name: h for h in view.view}
    finally:
        view.DestroyView()
