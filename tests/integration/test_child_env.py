"""No child process sees rackcert's environment whole: the password variables never reach one.

Two real children: Ansible started by ansible-runner (a local play dumps what its modules
see), and the check suite started by `rackcert validate --local` (a wrapper around the
FAKE nvidia-smi, a GPU being what this machine lacks, dumps what the checks' commands see).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rackcert.configure.runner import configure
from rackcert.core.runs import RunDir
from rackcert.core.spec_loader import load_spec
from tests.support.plugins.validate import FAKE_SMI

ROOT = Path(__file__).resolve().parents[2]
VCENTER_SECRET = "vc-Env-Secret-5521"
OTHER_SECRET = "shell-Only-Token-9090"

PLAY = """\
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: dump the environment Ansible's modules get
      ansible.builtin.shell: env > {{ dump }}
"""


def _env_lines(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {k: v for k, v in pairs}


def test_ansible_gets_a_named_environment_without_passwords(tmp_path, monkeypatch):
    monkeypatch.setenv("RACKCERT_VCENTER_PASSWORD", VCENTER_SECRET)  # the lab spec's variable
    monkeypatch.setenv("RC_TEST_SHELL_TOKEN", OTHER_SECRET)
    loaded = load_spec(ROOT / "inventories" / "r750xa-4node.yaml")
    run = RunDir.create(tmp_path / "runs", "r750xa", loaded.sha256, loaded.text)
    play = tmp_path / "env.yml"
    play.write_text(PLAY)
    dump = tmp_path / "ansible.env"
    configure(loaded, run, playbook=play, extravars={"dump": str(dump)})
    env = _env_lines(dump)
    assert env.get("ANSIBLE_ROLES_PATH"), "rackcert's own Ansible settings arrive"
    assert "RACKCERT_VCENTER_PASSWORD" not in env and "RC_TEST_SHELL_TOKEN" not in env
    text = dump.read_text()
    assert VCENTER_SECRET not in text and OTHER_SECRET not in text


def test_check_suite_gets_a_named_environment_without_passwords(tmp_path):
    tools = tmp_path / "tools" / "h200-node1"
    tools.mkdir(parents=True)
    dump = tmp_path / "suite.env"
    wrapper = tools / "nvidia-smi"
    wrapper.write_text(f'#!/bin/sh\nenv >> "{dump}"\nexec "{FAKE_SMI}" "$@"\n')
    wrapper.chmod(0o755)
    (tools / "fake-nvidia-smi.json").write_text("{}")
    env = {
        **os.environ,
        "RACKCERT_VCENTER_PASSWORD": VCENTER_SECRET,
        "RC_TEST_SHELL_TOKEN": OTHER_SECRET,
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rackcert.cli",
            "validate",
            str(ROOT / "inventories" / "h200-local.yaml"),
        ]
        + ["--local", "--runs-dir", str(tmp_path / "runs"), "--check", "gpu.count"]
        + ["--tool-path", str(tmp_path / "tools" / "{node}"), "--no-facts"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert dump.is_file(), done.stdout + done.stderr
    text = dump.read_text()
    assert "PATH=" in text
    assert VCENTER_SECRET not in text and OTHER_SECRET not in text
