"""Hostile spec values never run code on the controller.

A spec value reaches Ansible through the generated inventory and extra vars; Ansible
templates strings on the controller, so `{{ lookup('pipe', ...) }}` in a VM address would
run there. Three layers stop it, each tested against the real component: spec check refuses
Jinja markers and validates addresses, users and interface names; the inventory writes every
value `!unsafe` (tested with a real ansible-playbook run on a spec that bypassed the checks);
ssh command lines end their options with `--` (tested with the real OpenSSH client).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rackcert.core.errors import SpecError
from rackcert.core.spec_loader import load_spec
from tests.support.spec_helpers import R750, example_data, mutated, write_spec


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
