"""The playbooks pass Ansible's own syntax check and ansible-lint's production profile."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rackcert.configure.collection import collections_root
from rackcert.core.paths import playbooks_dir

BIN = Path(sys.executable).parent


def _env(home: Path) -> dict[str, str]:
    """Ansible's home and the collection link under the test's own tmp_path: nothing is left
    in /tmp afterwards (one directory per worker used to stay there for good)."""
    return dict(
        os.environ,
        ANSIBLE_ROLES_PATH=str(playbooks_dir() / "roles"),
        # site.yml names the roles rackcert.gpu.*: the checkout's playbooks/ as that collection.
        ANSIBLE_COLLECTIONS_PATH=str(collections_root(home / "collections")),
        ANSIBLE_HOME=str(home / "ansible-home"),
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    )


def syntax_check(playbook: str | Path, home: Path) -> subprocess.CompletedProcess[str]:
    """`ansible-playbook --syntax-check` of a playbook, from playbooks/, Ansible's home in
    `home`."""
    return subprocess.run(
        [str(BIN / "ansible-playbook"), "--syntax-check", "-i", "localhost,", str(playbook)],
        cwd=playbooks_dir(),
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=300,
    )


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
