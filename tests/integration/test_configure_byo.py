"""Bring your own Ansible, fast: spec fields and CLI options checked without a host.

(The real runs are in test_configure_sources.py and test_configure_collection.py.)
"""

from __future__ import annotations

import subprocess
import sys

from tests.support.spec_helpers import R750


def _cli_process(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rackcert.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_reference_spec_tarball_passes_check():
    proc = _cli_process("spec", "check", str(R750))
    assert proc.returncode == 0, proc.stdout + proc.stderr
