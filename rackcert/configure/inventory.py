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

from rackcert.errors import InputError
from rackcert.placement import place
from rackcert.spec import PackageSource, SourceComponent, Spec

VENDOR_COMPONENTS: tuple[SourceComponent, ...] = (
    "ofed",
    "nvidia_driver",
    "cuda",
    "container_toolkit",
)


def _group_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


def _source_vars(prefix: str, source: PackageSource | None) -> dict[str, Any]:
    source = source or PackageSource()
    key_file = str(Path(source.key_file).expanduser()) if source.key_file else ""
    return {
        f"{prefix}_repo_url": source.repo_url or "",
        f"{prefix}_repo_key_url": source.key_url or "",
        f"{prefix}_repo_key_file": key_file,  # on the controller; the role copies it
        f"{prefix}_local_path": source.path or "",
        f"{prefix}_package": source.package or "",
    }


# EL 8's platform Python (/usr/libexec/platform-python) is 3.6; the ansible-core rackcert
# pins (2.15-2.19) needs 3.8 or later on the node (ansible-core 2.17 porting guide), so EL 8
# nodes run Ansible with AppStream's python3.11 (`dnf install python3.11` once, by hand or
# in the VM template). guest.ansible_vars.ansible_python_interpreter overrides it.
_INTERPRETERS = {"rhel-8": "/usr/bin/python3.11"}
# Variables the operator may set through guest.ansible_vars although rackcert sets a default.
_OVERRIDABLE = frozenset({"ansible_python_interpreter"})


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


def _guest_vars(spec: Spec) -> dict[str, Any]:
    g = spec.guest
    out: dict[str, Any] = {
        "rackcert_rack": spec.metadata.name,
        "rackcert_guest_os": g.os,
        "rackcert_become": g.ssh.become,
        "ofed_version": g.ofed or "",
        "nvidia_driver_version": g.nvidia_driver or "",
        "cuda_version": g.cuda or "",
        "container_toolkit_version": g.container_toolkit or "",
        "container_toolkit_runtime": g.container_runtime,
        "dl_runtime_packages": list(g.python_packages),
        "dl_runtime_horovod": g.horovod,
        "dl_runtime_venv": g.dl_venv,
        "dl_runtime_system_site_packages": g.dl_system_site_packages,
        "ssh_trust_user": g.ssh.user,
    }
    for comp in VENDOR_COMPONENTS:
        out |= _source_vars(comp, g.sources.get(comp))
    dl = g.sources.get("dl_runtime")
    out["dl_runtime_index_url"] = dl.repo_url if dl and dl.repo_url else ""
    out["dl_runtime_wheelhouse"] = dl.path if dl and dl.path else ""
    nt = g.sources.get("nccl_tests")  # a pinned tarball on the controller, copied by the role
    out["nccl_tests_tarball"] = nt.path if nt and nt.path else ""
    out["nccl_tests_sha256"] = nt.sha256 if nt and nt.sha256 else ""
    out["nccl_tests_version"] = nt.version if nt and nt.version else ""
    return out


def _storage_vars(spec: Spec) -> dict[str, Any]:
    nfs = spec.storage.nfs
    if nfs is None:
        return {"storage_nfs_enabled": False}
    return {
        "storage_nfs_enabled": True,
        "storage_nfs_server": nfs.server,
        "storage_nfs_export": nfs.export,
        "storage_nfs_mount_point": nfs.mount_point,
        "storage_nfs_options": list(nfs.options),
        "storage_nfs_fstype": nfs.fstype,
    }


def _network_vars(spec: Spec) -> dict[str, Any]:
    net = spec.network
    return {
        "network_mtu": net.mtu,
        "network_interface": net.interface or "",
        "network_roce_enabled": net.roce.enabled,
        "network_roce_pfc_priority": net.roce.pfc_priority,
        "network_roce_dscp": net.roce.dscp,
    }


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
    group_vars = _group_vars(spec)
    taken = ansible_var_conflicts(spec)
    if taken:
        raise InputError(
            f"guest.ansible_vars.{taken[0]}: rackcert sets this variable from the spec;"
            " change the spec field it comes from instead"
        )
    return {"all": {"vars": group_vars | dict(spec.guest.ansible_vars), "children": children}}


def _group_vars(spec: Spec) -> dict[str, Any]:
    group_vars = _guest_vars(spec) | _storage_vars(spec) | _network_vars(spec)
    interpreter = _INTERPRETERS.get(spec.guest.os)
    if interpreter:
        group_vars["ansible_python_interpreter"] = interpreter
    return group_vars


# What _host_vars sets per VM (host vars would win over guest.ansible_vars anyway).
_HOST_VARS = (
    "ansible_host",
    "ansible_port",
    "ansible_user",
    "ansible_ssh_private_key_file",
    "rackcert_vm_name",
    "rackcert_esx_host",
    "rackcert_template",
    "rackcert_gpus_expected",
)


def ansible_var_conflicts(spec: Spec) -> list[str]:
    """Names in guest.ansible_vars that rackcert derives from other spec fields (refused).

    Why refused: the spec would then say two things about one value, and the inventory
    would silently pick one of them.
    """
    derived = set(_group_vars(spec)) | set(_HOST_VARS)
    return sorted((derived - _OVERRIDABLE) & set(spec.guest.ansible_vars))


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
