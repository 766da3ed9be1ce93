"""What more than one test module needs from the old test_hgx_checks.py:
tests/integration/test_hgx_checks.py, tests/integration/test_vgpu_branch.py,
tests/unit/test_hgx_checks.py, tests/unit/test_vgpu_branch.py.
"""

from __future__ import annotations

import os
import subprocess

from rackcert.core.paths import inventories_dir
from rackcert.core.spec_loader import load_spec
from tests.support.paths import FAKES
from validation.expect import expectations
from validation.probes import ProbeOutput

FAKE = FAKES / "nvidia-smi-hgx-partition"
HGX_CHECKS = ("gpu.vgpu.license", "gpu.nvlink.links", "gpu.topo.partition", "gpu.fabric")
PROBES = {"nvlink": "nvlink -s", "gpu_topology": "topo -m", "nvidia_smi": "-q"}


def probe_outputs(**knobs: str) -> dict[str, ProbeOutput]:
    env = {**os.environ, **knobs}
    out = {}
    for key, args in PROBES.items():
        done = subprocess.run([str(FAKE), *args.split()], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        out[key] = ProbeOutput(key, 0, done.stdout)
    return out


def expect(vm: str):
    return expectations(load_spec(inventories_dir() / "hgx-h200-4node.yaml").spec)[vm]
