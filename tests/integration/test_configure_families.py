"""Every family's task files parse (ansible-playbook --syntax-check) with that family's variables.

CI's hosts are Debian 12, so the EL files (dnf module streams, versionlock) and the Debian
family's files that Ubuntu runs never execute here; site.yml's own syntax check does not
reach them either, because the roles include them dynamically by `os_family`. Here each
`*-<Family>.yml` is imported statically into a playbook that loads every role's
vars/<Family>.yml, so a YAML or task-keyword error in any of them fails. ansible-lint's
production profile (tests/integration/test_configure_lint.py) lints the same files.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rackcert.core.paths import playbooks_dir
from tests.support.configure_lint import syntax_check

FAMILIES = {
    "RedHat": ("RedHat", "9", "5.14.0-427.el9.x86_64"),
    "Debian": ("Ubuntu", "22.04", "6.8.0-40-generic"),
}


def _playbook(family: str, tmp: Path) -> tuple[Path, list[Path]]:
    roles = playbooks_dir() / "roles"
    files = sorted(roles.glob(f"*/tasks/*-{family}.yml"))
    vars_files = sorted(str(p) for p in roles.glob(f"*/vars/{family}.yml"))
    distribution, version, kernel = FAMILIES[family]
    facts = {"os_family": family, "distribution": distribution, "kernel": kernel,
             "distribution_version": version}  # fmt: skip
    play = {
        "name": f"{family} task files",
        "hosts": "localhost",
        "gather_facts": False,
        "vars_files": vars_files,
        "vars": {"ansible_facts": facts},
        "tasks": [
            {"name": f"{p.parent.parent.name}: {p.name}", "ansible.builtin.import_tasks": str(p)}
            for p in files
        ],  # fmt: skip
    }
    path = tmp / f"{family}.yml"
    path.write_text(yaml.safe_dump([play], sort_keys=False))
    return path, files


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_task_files_pass_the_syntax_check(family: str, tmp_path: Path) -> None:
    playbook, files = _playbook(family, tmp_path)
    names = {p.name for p in files}
    # What a version change needs on every family is there to be checked.
    assert {f"install-{family}.yml", f"hold-{family}.yml", f"branch-{family}.yml"} <= names
    proc = syntax_check(playbook, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"playbook: {playbook}" in proc.stdout
