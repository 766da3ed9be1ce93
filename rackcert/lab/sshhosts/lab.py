"""The lab's view of a spec: its VMs started as SSH test hosts at their spec addresses.

Why: `rackcert lab up` stands a host in for each VM the spec names (owner "lab"), reuses them
while they run as recorded, and `lab down SPEC` stops that spec's hosts only, since every lab
spec's hosts share the owner "lab".

Example:
    hosts = start_lab_hosts(load_spec("inventories/lab.yaml").spec)
    stop_spec_hosts(spec)
"""

from __future__ import annotations

import ipaddress
import json
import shutil
from pathlib import Path
from typing import Any

from rackcert.core.errors import InputError
from rackcert.lab.sshhosts.common import RUNTIME_ROOT, run_cmd
from rackcert.lab.sshhosts.host import TestHost
from rackcert.lab.sshhosts.network import (
    ALIAS_TAG,
    LAB_OWNER,
    NETNS_PREFIX,
    bridge_alias,
    bridge_name,
    delete_bridge,
    destroy_netns,
    link_exists,
    netns_list,
    stop_owner,
)
from rackcert.lab.sshhosts.start import start_hosts


def lab_state_dir(spec: Any) -> Path:
    """Where the lab keeps its client key and hosts: next to the spec's guest.ssh.key_file."""
    return Path(spec.guest.ssh.key_file or "~/.cache/rackcert/lab/id_ed25519").expanduser().parent


def load_lab_hosts(spec: Any, *, owner: str = LAB_OWNER) -> list[TestHost]:
    """The lab hosts recorded by start_lab_hosts, if all of them still run; else []."""
    path = lab_state_dir(spec) / f"hosts-{owner}" / "hosts.json"
    try:
        hosts = [TestHost.from_dict(d) for d in json.loads(path.read_text())]
    except (OSError, ValueError, TypeError, KeyError):
        return []
    wanted = {(vm.name, vm.address) for vm in spec.vms}
    if {(h.name, h.address) for h in hosts} != wanted:
        return []
    if all(h.alive() and h.netns in netns_list() and h.reachable() for h in hosts):
        return hosts
    return []


def start_lab_hosts(spec: Any, *, restart: bool = False, owner: str = LAB_OWNER) -> list[TestHost]:
    """Start the spec's VMs as SSH test hosts (owner "lab") at their spec addresses.

    Idempotent: hosts already running as recorded are returned untouched unless
    `restart`. The VMs' addresses must share one /24 (the lab uses 10.77.0.0/24).
    `owner` is for tests only (`<pid>x<tag>`), so they never stop the real lab.
    The client key is the spec's guest.ssh.key_file (generated if missing); an
    `fstype: none` storage export is created and shared by all hosts (the lab's
    stand-in for a filer: the kernel here has no NFS server).

    Example:
        hosts = start_lab_hosts(load_spec("inventories/lab.yaml").spec)
    """
    if not spec.vms:
        raise InputError("the lab spec has no vms to start as SSH test hosts")
    if not restart:
        running = load_lab_hosts(spec, owner=owner)
        if running:
            return running
    stop_spec_hosts(spec, owner=owner, bridges=False)  # this spec's hosts, not another lab's
    nets = {ipaddress.IPv4Network(f"{vm.address}/24", strict=False) for vm in spec.vms}
    if len(nets) != 1:
        raise InputError(f"lab VM addresses must share one /24, got {sorted(map(str, nets))}")
    ports = {vm.ssh_port for vm in spec.vms}
    if len(ports) != 1:
        raise InputError("lab VMs must share one ssh_port")
    shared: list[str] = []
    nfs = spec.storage.nfs
    if nfs is not None and nfs.fstype == "none":
        shared.append(nfs.export)
    key_file = Path(spec.guest.ssh.key_file or "~/.cache/rackcert/lab/id_ed25519").expanduser()
    hosts = start_hosts(
        [vm.name for vm in spec.vms],
        str(nets.pop()),
        key_file,
        owner=owner,
        addresses=[vm.address for vm in spec.vms],
        port=ports.pop(),
        shared=shared,
    )
    from rackcert.lab.linkshape import shape_lab

    shape_lab(hosts, spec)  # the lab's links at the line rate the spec declares
    return hosts


def stop_lab_hosts() -> int:
    """Stop every lab host and the lab bridge; returns how many hosts were stopped."""
    return stop_owner(LAB_OWNER)


def stop_spec_hosts(spec: Any, *, owner: str = LAB_OWNER, bridges: bool = True) -> int:
    """Stop the SSH hosts of this spec's VMs only; returns how many were stopped.

    Every lab spec's hosts share the owner "lab" (`rackcert lab up` of two specs runs both),
    so `lab down SPEC` must not stop by owner: it stops the namespaces named after the spec's
    own VMs, then its subnet's bridge once no host is attached to it any more.
    """
    wanted = {f"{NETNS_PREFIX}{owner}-{vm.name}" for vm in spec.vms}
    count = 0
    for netns in netns_list():
        if netns in wanted:
            destroy_netns(netns)
            shutil.rmtree(RUNTIME_ROOT / netns, ignore_errors=True)
            count += 1
    subnets = {ipaddress.IPv4Network(f"{vm.address}/24", strict=False) for vm in spec.vms}
    for net in subnets if bridges else ():
        bridge = bridge_name(str(net))
        attached = run_cmd(["ip", "-o", "link", "show", "master", bridge], check=False).strip()
        mine = link_exists(bridge) and bridge_alias(bridge) == f"{ALIAS_TAG}{owner}"
        if mine and not attached:
            delete_bridge(bridge)
    return count
