"""Inventory from the spec, event reading, and the CLI's one-line input errors (no Ansible run)."""

from __future__ import annotations

import subprocess
import sys

from tests.support.configure_inventory import LAB


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "configure", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_rejects_unknown_tag_and_missing_password_env_in_one_line(tmp_path):
    bad_tag = _cli(str(LAB), "--tags", "network,gpu_magic", "--runs-dir", str(tmp_path))
    assert bad_tag.returncode == 2
    assert "unknown tag(s) gpu_magic" in bad_tag.stderr
    assert "Traceback" not in bad_tag.stderr + bad_tag.stdout
    no_env = _cli(
        str(LAB), "--become-password-env", "RC_NOT_SET_ANYWHERE", "--runs-dir", str(tmp_path)
    )
    assert no_env.returncode == 2
    assert "RC_NOT_SET_ANYWHERE is not set" in no_env.stderr
    assert not list(tmp_path.rglob("configure.json"))
