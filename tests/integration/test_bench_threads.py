"""CPU ranks run one intra-op thread unless OMP_NUM_THREADS says otherwise (worker.cpu_threads).

Why it matters: horovodrun leaves OMP_NUM_THREADS unset, so each rank of the lab's Horovod
launches started one OpenMP thread per core, and ranks sharing two cores spun against each
other (ResNet50 steps 5-8x slower). One interpreter per case: torch's thread count is global.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = (
    "import torch; from validation.bench.node.worker import cpu_threads;"
    " print(cpu_threads('cuda'), cpu_threads('cpu'), torch.get_num_threads())"
)


def _threads(omp: str | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env["PYTHONPATH"] = str(ROOT)
    if omp is not None:
        env["OMP_NUM_THREADS"] = omp
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-800:]
    return proc.stdout.split()


def test_cpu_rank_runs_one_thread_unless_told() -> None:
    assert _threads(None) == ["None", "1", "1"]
    assert _threads("2") == ["None", "2", "2"]
