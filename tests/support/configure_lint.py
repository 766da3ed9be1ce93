"""What more than one test module needs from the old test_configure_lint.py:
tests/integration/test_configure_families.py, tests/integration/test_configure_lint.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rackcert.configure.collection import collections_root
from rackcert.core.paths import playbooks_dir

BIN = Path(sys.executable).parent


def ansible_env(home: Path) -> dict[str, str]:
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
        env=ansible_env(home),
        capture_output=True,
        text=True,
        timeout=300,
    )
