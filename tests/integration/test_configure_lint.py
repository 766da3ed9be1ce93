"""The playbooks pass Ansible's own syntax check and ansible-lint's production profile."""

from __future__ import annotations

import subprocess
from pathlib import Path

from rackcert.core.paths import playbooks_dir
from tests.support.configure_lint import BIN, syntax_check
from tests.support.configure_lint import ansible_env as _env


def test_site_yml_syntax_check(tmp_path: Path) -> None:
    proc = syntax_check("site.yml", tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "playbook: site.yml" in proc.stdout


def test_ansible_lint_production_profile(tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(BIN / "ansible-lint"), "--offline", "--profile", "production", "--nocolor"]
        + ["-f", "pep8"],
        cwd=playbooks_dir(),
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "Profile 'production' was required, and it passed" in out
