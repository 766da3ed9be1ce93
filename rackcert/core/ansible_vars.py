"""The one table from spec fields to the Ansible variables they become, and what a spec may add.

Why in the spine: `spec check` must refuse a `guest.ansible_vars` entry that shadows a spec
field or reaches Ansible's connection layer, and the configure stage must build the same
variables. Both read this module; the spec layer never imports the Ansible layer.

Why an allow-list: Ansible's connection variables (`ansible_connection`,
`ansible_ssh_common_args`, `ansible_ssh_executable`, `ansible_ssh_args`, ...) run commands on the
controller or drop the enrolled host keys (Ansible docs: "Connection methods and details",
the ssh plugin's `ssh_args`/`ssh_common_args`/`ssh_executable`, which are passed to a local
shell). A spec author is semi-trusted (docs/security.md), so `guest.ansible_vars` may set only
the variables rackcert's roles declare in their `defaults/` and an absolute
`ansible_python_interpreter`.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

from rackcert.core.paths import playbooks_dir
from rackcert.core.spec import PackageSource, SourceComponent, Spec, source_kind

VENDOR_COMPONENTS: tuple[SourceComponent, ...] = (
    "ofed",
    "nvidia_driver",
    "cuda",
    "container_toolkit",
)

# EL 8's platform Python (/usr/libexec/platform-python) is 3.6; the ansible-core rackcert
# pins (2.15-2.19) needs 3.8 or later on the node (ansible-core 2.17 porting guide), so EL 8
# nodes run Ansible with AppStream's python3.11 (`dnf install python3.11` once, by hand or
# in the VM template). guest.ansible_vars.ansible_python_interpreter overrides it.
INTERPRETERS = {"rhel-8": "/usr/bin/python3.11"}
INTERPRETER_VAR = "ansible_python_interpreter"

# What the inventory sets per VM (host vars would win over guest.ansible_vars anyway).
HOST_VARS = (
    "ansible_host",
    "ansible_port",
    "ansible_user",
    "ansible_ssh_private_key_file",
    "rackcert_vm_name",
    "rackcert_esx_host",
    "rackcert_template",
    "rackcert_gpus_expected",
)


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
        # A path, never the token: Ansible reads the file on the controller (no_log).
        "vgpu_license_token_file": (
            str(Path(g.vgpu_license_token_file).expanduser()) if g.vgpu_license_token_file else ""
        ),
    }
    for comp in VENDOR_COMPONENTS:
        out |= _source_vars(comp, g.sources.get(comp))
    driver = g.sources.get("nvidia_driver")
    run_file = driver is not None and source_kind(driver.path or "") == "run"
    # NVIDIA's vGPU guest driver installer: on the controller, by checksum (role nvidia_driver).
    out["nvidia_driver_run_file"] = driver.path if driver and run_file else ""
    out["nvidia_driver_run_sha256"] = (driver.sha256 or "") if driver and run_file else ""
    if run_file:
        out["nvidia_driver_local_path"] = ""
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
        **_firewall_vars(spec),
    }


def _firewall_vars(spec: Spec) -> dict[str, Any]:
    """network.firewall for the node_policy role, which slurm_node, dl_runtime and
    ssh_trust call to open their ports."""
    fw = spec.network.firewall
    return {
        "node_policy_firewalld": fw.firewalld is not None,
        "node_policy_zone": fw.firewalld.zone if fw.firewalld else "public",
        "node_policy_interfaces": list(fw.firewalld.interfaces) if fw.firewalld else [],
        "node_policy_srun_port_range": fw.srun_port_range,
        "node_policy_launcher_port_range": fw.launcher_port_range,
    }


def _slurm_vars(spec: Spec) -> dict[str, Any]:
    slurm = spec.slurm
    if slurm is None:
        return {"slurm_node_enabled": False}
    from rackcert.core.slurm.conf import gres_type

    return {
        "slurm_node_enabled": True,
        "slurm_node_install": slurm.install_slurmd,
        "slurm_node_controller": slurm.controller.address,
        "slurm_node_controller_port": slurm.controller.port,
        "slurm_node_slurmd_port": slurm.slurmd_port,
        "slurm_node_munge_key_file": slurm.munge_key_file,  # a path on the controller
        "slurm_node_munge_socket": slurm.munge_socket,
        "slurm_node_conf_file": slurm.conf_file or "",
        "slurm_node_gres_type": gres_type(spec, spec.vms[0]) if spec.vms else "gpu",
        **_health_check_vars(spec),
    }


def _health_check_vars(spec: Spec) -> dict[str, Any]:
    """The wrapper the role installs where slurm.conf names the health check: the same text
    `rackcert slurm health-check-conf` prints (one source, rackcert.core.slurm.conf)."""
    check = spec.slurm.health_check if spec.slurm else None
    if check is None:
        return {"slurm_node_health_check": False}
    from rackcert.core.slurm.conf import health_check_script

    return {
        "slurm_node_health_check": True,
        "slurm_node_health_check_rackcert": check.rackcert,
        "slurm_node_health_check_spec_on_node": check.spec_on_node,
        "slurm_node_health_check_program": check.program or "",
        "slurm_node_health_check_script": health_check_script(check.rackcert, check.spec_on_node),
    }


def spec_group_vars(spec: Spec) -> dict[str, Any]:
    """The group variables every node gets, each derived from one spec field."""
    group_vars = _guest_vars(spec) | _storage_vars(spec) | _network_vars(spec) | _slurm_vars(spec)
    interpreter = INTERPRETERS.get(spec.guest.os)
    if interpreter:
        group_vars[INTERPRETER_VAR] = interpreter
    return group_vars


@functools.cache
def role_variables() -> frozenset[str]:
    """The variables rackcert's roles declare in their defaults/: what a spec may tune."""
    names: set[str] = set()
    for path in sorted(playbooks_dir().glob("roles/*/defaults/main.yml")):
        data = yaml.safe_load(path.read_text()) or {}
        if isinstance(data, dict):
            names.update(str(key) for key in data)
    return frozenset(names)


def ansible_var_problems(spec: Spec) -> list[tuple[str, str]]:
    """(name, message) for each guest.ansible_vars entry a spec may not set.

    Why refused: a derived name would make the spec say two things about one value; any
    name outside the roles' defaults (Ansible's connection and ssh variables first of all)
    reaches the controller's own command lines.
    """
    derived = (set(spec_group_vars(spec)) | set(HOST_VARS)) - {INTERPRETER_VAR}
    allowed = role_variables()
    problems: list[tuple[str, str]] = []
    for name, value in spec.guest.ansible_vars.items():
        if name == INTERPRETER_VAR:
            if not isinstance(value, str) or not value.startswith("/") or "\n" in value:
                problems.append((name, "must be an absolute path to a Python on the nodes"))
        elif name in derived:
            problems.append(
                (name, f"rackcert sets {name} from the spec; change the spec field it comes from")
            )
        elif name not in allowed:
            problems.append(
                (
                    name,
                    f"{name} is not a variable of rackcert's roles; guest.ansible_vars may set"
                    " only the roles' defaults (playbooks/roles/*/defaults) and an absolute"
                    f" {INTERPRETER_VAR}",
                )
            )
    return sorted(problems)
