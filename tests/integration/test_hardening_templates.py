"""Hostile spec values never run code on the controller.

A spec value reaches Ansible through the generated inventory and extra vars; Ansible
templates strings on the controller, so `{{ lookup('pipe', ...) }}` in a VM address would
run there. Three layers stop it, each tested against the real component: spec check refuses
Jinja markers and validates addresses, users and interface names; the inventory writes every
value `!unsafe` (tested with a real ansible-playbook run on a spec that bypassed the checks);
ssh command lines end their options with `--` (tested with the real OpenSSH client).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rackcert.configure.inventory import build_inventory, dump_unsafe_yaml, write_inventory
from rackcert.core.spec_loader import load_spec
from rackcert.core.ssh_target import SshTarget
from tests.support.spec_helpers import LAB

ANSIBLE_PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")


HOSTILE_PLAYBOOK = """\
- hosts: rackcert_nodes
  gather_facts: false
  connection: local
  tasks:
    - ansible.builtin.debug:
        msg: "host={{ ansible_host }} nfs={{ storage_nfs_server }} extra={{ probe }}"
    - ansible.builtin.assert:  # plain values keep their type (2.19 re-types `!unsafe`)
        that: ["empty | length == 0", "version is string", "version == '11.4'"]
"""


def test_inventory_values_are_never_templated(tmp_path):
    """A value that slipped past spec check is still data to a real ansible-playbook run."""
    marker = tmp_path / "pwned"
    hostile = "{{ lookup('pipe', 'touch " + str(marker) + "') }}"
    spec = load_spec(LAB).spec
    spec.vms = spec.vms[:1]
    # Bypass validation on purpose: the inventory must hold even if a check is ever missed.
    object.__setattr__(spec.vms[0], "address", hostile)
    object.__setattr__(spec.storage.nfs, "server", hostile)
    inventory = write_inventory(build_inventory(spec), tmp_path / "inv")
    assert "!unsafe" in inventory.read_text()
    extra = tmp_path / "extra.yml"
    extra.write_text(dump_unsafe_yaml({"probe": hostile, "empty": "", "version": "11.4"}))
    playbook = tmp_path / "play.yml"
    playbook.write_text(HOSTILE_PLAYBOOK)
    proc = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), "-e", f"@{extra}", str(playbook)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not marker.exists(), "a spec value ran a command on the controller"
    # The value arrives literally, lookup and all.
    assert proc.stdout.count("lookup('pipe'") == 3, proc.stdout


def test_ssh_destination_after_double_dash(tmp_path):
    """A hostile user name is a destination to the real OpenSSH client, never an option."""
    marker = tmp_path / "proxy-ran"
    target = SshTarget(host="127.0.0.1", port=9, user=f"-oProxyCommand=touch {marker}")
    argv = target.argv("true")
    assert argv[argv.index("--") + 1].startswith("-oProxyCommand")
    subprocess.run(argv, capture_output=True, timeout=30, check=False)
    assert not marker.exists()


def test_configure_extra_vars_are_never_templated(tmp_path):
    """The real ansible-runner run: extra vars rackcert passes reach the play as data."""
    from rackcert.configure.runner import configure
    from rackcert.core.runs import RunDir

    marker = tmp_path / "pwned-extra"
    hostile = "{{ lookup('pipe', 'touch " + str(marker) + "') }}"
    loaded = load_spec(LAB)
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        "- hosts: rackcert_nodes\n  gather_facts: false\n  connection: local\n  tasks:\n"
        '    - ansible.builtin.debug:\n        msg: "extra={{ probe }}"\n'
    )
    run = RunDir.create(tmp_path / "runs", "lab", loaded.sha256, loaded.text)
    result = configure(loaded, run, playbook=playbook, extravars={"probe": hostile})
    assert result.status == "ok", result.error
    assert not marker.exists(), "an extra var ran a command on the controller"
