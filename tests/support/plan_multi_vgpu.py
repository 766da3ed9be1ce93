"""What more than one test module needs from the old test_plan_multi_vgpu.py:
tests/integration/test_plan_multi_vgpu.py, tests/unit/test_plan_multi_vgpu.py.
"""

from __future__ import annotations

from typing import Any

from tests.support.spec_helpers import LAB, example_data

PROFILE = "grid_a100d-40c"
VGPU = {"backing": "vgpu", "role": "gpu", "vgpu": PROFILE}


def vgpu_data() -> dict[str, Any]:
    """The lab rack (two A100 per 2-GPU VM, vSphere 7.0.3: no device group) in vGPU mode."""
    data = example_data(LAB)
    data["vm_templates"][0].update(gpu_mode="vgpu", vgpu_profile=PROFILE)
    return data
