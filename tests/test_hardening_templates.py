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

import pytest

from rackcert.configure.inventory import build_inventory, dump_unsafe_yaml, write_inventory
from rackcert.core.errors import SpecError
from rackcert.core.spec_loader import load_spec
from rackcert.core.ssh_target import SshTarget
from tests.spec_helpers import LAB, R750, example_data, mutated, write_spec

ANSIBLE_PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")


def _error(tmp_path: Path, data: dict) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(write_spec(tmp_path, data))
    message = str(info.value)
    assert "\n" not in message
    return message


def _set(path: tuple, value):
    def edit(d):
        node = d
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value

    return edit


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("metadata", "owner"), "{{ lookup('pipe','touch /tmp/x') }}", "metadata.owner"),
        (("metadata", "description"), "rack {% if 1 %}x{% endif %}", "metadata.description"),
        (("guest", "nvidia_driver"), "535 {# hidden #}", "guest.nvidia_driver"),
        (("storage", "nfs", "options"), ["vers=3", "{{ 7*7 }}"], "storage.nfs.options"),
        (("storage", "nfs", "export"), "/ifs/{{ x }}", "storage.nfs.export"),
    ],
)
def test_spec_check_refuses_jinja_markers(tmp_path, path, value, field):
    message = _error(tmp_path, mutated(example_data(R750), _set(path, value)))
    assert f"{field}:" in message
    assert "Jinja" in message
    assert ":" in message.split(field)[0]  # file:line: prefix before the field


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("vms", 0, "address"), "{{ lookup('pipe','id') }}", "vms[0].address"),
        (("vms", 0, "address"), "-oProxyCommand=id", "vms[0].address"),
        (("vms", 1, "address"), "node 2", "vms[1].address"),
        (("hosts", 0, "address"), "esx01;reboot", "hosts[0].address"),
        (("vcenter", "host"), "vc.example.internal/x", "vcenter.host"),
        (("guest", "ssh", "user"), "-oProxyCommand=touch x", "guest.ssh.user"),
        (("guest", "ssh", "user"), "root user", "guest.ssh.user"),
        (("network", "interface"), "eth0;id", "network.interface"),
        (("network", "interface"), "averyveryverylongname", "network.interface"),
        (("network", "interface"), "-eth0", "network.interface"),
    ],
)
def test_spec_check_validates_names_and_addresses(tmp_path, path, value, field):
    message = _error(tmp_path, mutated(example_data(R750), _set(path, value)))
    assert f"{field}:" in message


@pytest.mark.parametrize("address", ["10.0.0.5", "fe80::1", "node-1.rack.example.internal"])
def test_good_addresses_pass(tmp_path, address):
    def edit(d):
        d["vms"][0]["address"] = address
        for tmpl in d["vm_templates"]:  # an existing VM: no cloud-init address rule applies
            tmpl.pop("source", None)

    data = mutated(example_data(R750), edit)
    assert load_spec(write_spec(tmp_path, data)).spec.vms[0].address == address


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
