"""The Ansible inventory, generated from the spec (never written by hand).

Why generated: the spec is the one statement of what the rack must be; an
inventory typed by hand drifts from it. `build_inventory` is a pure function
(spec in, YAML-able dict out) so it is tested without Ansible; `write_inventory`
puts it into the run directory next to the artifacts of the run that used it.

Groups: `rackcert_nodes` (every VM), `rackcert_gpu_nodes` (VMs with GPUs),
`rackcert_head` (the first VM: rendezvous and rank 0 for the benchmarks),
`rackcert_workers` (the others), and `template_<name>` per VM template. Role
variables carry the role's prefix (`nvidia_driver_version`, `storage_nfs_server`),
the convention of NVIDIA's own ansible-role-nvidia-driver.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from rackcert.core.ansible_vars import ansible_var_problems, spec_group_vars
from rackcert.core.errors import InputError
from rackcert.core.placement import place
from rackcert.core.spec import Spec


def _group_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


def _host_vars(spec: Spec, vm_name: str, gpus_by_vm: dict[str, int], key: str | None) -> dict:
    vm = next(v for v in spec.vms if v.name == vm_name)
    hv: dict[str, Any] = {
        "ansible_host": vm.address,
        "ansible_port": vm.ssh_port,
        "ansible_user": spec.guest.ssh.user,
        "rackcert_vm_name": vm.name,
        "rackcert_esx_host": vm.host,
        "rackcert_template": vm.template,
        "rackcert_gpus_expected": gpus_by_vm.get(vm.name, 0),
    }
    if key:
        hv["ansible_ssh_private_key_file"] = str(Path(key).expanduser())
    return hv


def build_inventory(spec: Spec, *, key_file: str | None = None) -> dict[str, Any]:
    """The inventory for `spec` as a dict in Ansible's YAML inventory shape.

    Args:
        spec: the rack spec.
        key_file: SSH private key (default: the spec's guest.ssh.key_file).

    Example:
        inv = build_inventory(load_spec("inventories/lab.yaml").spec)
        inv["all"]["children"]["rackcert_nodes"]["hosts"]["lab-node1"]["ansible_host"]
    """
    key = key_file or spec.guest.ssh.key_file
    gpus_by_vm = {p.vm: len(p.gpus) for p in place(spec)} if spec.vms else {}
    nodes = {vm.name: _host_vars(spec, vm.name, gpus_by_vm, key) for vm in spec.vms}
    names = [vm.name for vm in spec.vms]
    children: dict[str, Any] = {
        "rackcert_nodes": {"hosts": nodes},
        "rackcert_gpu_nodes": {"hosts": {n: {} for n in names if gpus_by_vm.get(n, 0) > 0}},
        "rackcert_head": {"hosts": {n: {} for n in names[:1]}},
        "rackcert_workers": {"hosts": {n: {} for n in names[1:]}},
    }
    for tpl in spec.vm_templates:
        members: dict[str, dict[str, Any]] = {
            vm.name: {} for vm in spec.vms if vm.template == tpl.name
        }
        if members:
            children[f"template_{_group_name(tpl.name)}"] = {"hosts": members}
    group_vars = spec_group_vars(spec)
    problems = ansible_var_problems(spec)
    if problems:  # `spec check` refuses these at their line; a library caller gets one error
        name, message = problems[0]
        raise InputError(f"guest.ansible_vars.{name}: {message}")
    return {"all": {"vars": group_vars | dict(spec.guest.ansible_vars), "children": children}}


class _Unsafe(str):
    """A string Ansible must take as data, never as a Jinja template."""


class _InventoryDumper(yaml.SafeDumper):
    """Writes every string value that could hold a template with Ansible's `!unsafe` tag.

    Why: Ansible templates the strings of an inventory file on the controller (`ansible_host`
    as soon as it connects, role variables when a task reads them), so a spec value such as
    `{{ lookup('pipe', 'id') }}` would run there. `!unsafe` is Ansible's documented marker for
    "never template this" (docs: Playbook Guide, "Advanced playbook syntax: Unsafe or raw
    strings"). Mapping keys (group and host names) are validated names and stay plain.
    """


_InventoryDumper.add_representer(
    _Unsafe, lambda dumper, data: dumper.represent_scalar("!unsafe", str(data))
)


def mark_unsafe(value: Any) -> Any:
    """`value` with every string inside it (not mapping keys) that holds "{" marked `!unsafe`."""
    if isinstance(value, str):
        # Only a string with "{" can hold a Jinja template ({{ }}, {% %}, {# #}); the others
        # stay plain because ansible-core 2.19 re-resolves an `!unsafe` scalar's type:
        # `!unsafe '11.4'` arrives as a float and `!unsafe ''` as None, which breaks the roles.
        return _Unsafe(value) if "{" in value else value
    if isinstance(value, list | tuple):
        return [mark_unsafe(item) for item in value]
    if isinstance(value, dict):
        return {key: mark_unsafe(item) for key, item in value.items()}
    return value


def dump_unsafe_yaml(data: Any) -> str:
    """YAML text of `data` for Ansible: no string value in it is ever templated."""
    return yaml.dump(
        mark_unsafe(data), Dumper=_InventoryDumper, sort_keys=False, default_flow_style=False
    )


def write_inventory(inventory: dict[str, Any], directory: Path) -> Path:
    """Write the inventory as `hosts.yml` under `directory`; returns the file.

    Every value comes from the spec, so any string that could be a template is written
    `!unsafe` (see `mark_unsafe`): a spec value is data to Ansible, never code.
    """
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "hosts.yml"
    header = "# Generated by rackcert from the rack spec; do not edit (it is rewritten each run).\n"
    path.write_text(header + dump_unsafe_yaml(inventory))
    return path
