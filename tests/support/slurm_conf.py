"""What more than one test module needs from the old test_slurm_conf.py:
tests/integration/test_slurm_conf.py, tests/unit/test_slurm_conf.py.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from rackcert.core.paths import REPO_ROOT

LAB = REPO_ROOT / "inventories" / "lab.yaml"
SLURM = {
    "controller": {"address": "10.77.0.1"},
    "cluster": "lab",
    "partition": "gpu",
    "munge_key_file": "/etc/rackcert/munge.key",
}


def slurm_spec(tmp_path: Path, slurm: dict | None = SLURM, text: str | None = None) -> Path:
    data = yaml.safe_load(LAB.read_text())
    if slurm is not None:
        data["slurm"] = slurm
    path = tmp_path / "spec.yaml"
    path.write_text(text or yaml.safe_dump(data, sort_keys=False))
    return path
