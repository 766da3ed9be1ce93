"""What more than one test module needs from the old test_validate_local.py:
tests/integration/test_metrics_textfile.py, tests/integration/test_validate_after_upgrade.py,
tests/integration/test_validate_local.py, tests/unit/test_metrics_textfile.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
H200_SPEC = ROOT / "inventories" / "h200-local.yaml"


def rackcert(*args: str, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "rackcert.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )
