"""The test hosts' network: one namespace per host, a veth to its subnet's bridge, owners.

Why: every host has its own netns with one interface `eth0` (a veth) whose other end hangs on a
bridge in the root namespace. The bridge owns the subnet's `.1` and is the hosts' default
gateway, so the root namespace reaches every host and the hosts reach each other (SSH between
peers, rendezvous for torch.distributed). The MTU of each host's `eth0` is its own.

Namespaces are named `rackcert-<owner>-<host>` and a bridge's alias names its owner: the test
process's pid (so parallel runs and xdist workers never collide) or `lab` for the lab. A
bridge is created atomically by the kernel, which is what makes `claim_subnet` safe.

Example:
    subnet = claim_subnet()           # a free 10.x.y.0/24, its bridge created
    release_subnet(subnet)            # idempotent
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from rackcert.core.errors import InputError
from rackcert.lab import timesync
from rackcert.lab.sshhosts.common import RUNTIME_ROOT, SshHostError, run_cmd

NETNS_PREFIX = "rackcert-"
LAB_OWNER = "lab"
SWITCH_MTU = 9216
ALIAS_TAG = "rackcert-sshhosts owner="
# Owner: "lab", or a pid optionally tagged (`1234x2`) so one process can own separate sets.
OWNER_RE = re.compile(r"^rackcert-(?P<owner>lab|[0-9]+(?:x[0-9a-z]+)?)-(?P<name>.+)$")


def hex_net(net: ipaddress.IPv4Network) -> str:
    """The first three octets of a /24 in hex (names of its bridge and veths)."""
    return "".join(f"{b:02x}" for b in net.network_address.packed[:3])


def bridge_name(subnet: str) -> str:
    """Bridge of a /24: `rcb` + the first three octets in hex (15-char interface limit)."""
    return "rcb" + hex_net(parse_subnet(subnet))


def parse_subnet(subnet: str) -> ipaddress.IPv4Network:
    """The /24 a set of test hosts lives on; bad input is an InputError."""
    try:
        net = ipaddress.IPv4Network(subnet, strict=True)
    except ValueError as exc:
        raise InputError(f"test host subnet {subnet!r}: {exc}") from None
    if net.prefixlen != 24:
        raise InputError(f"test host subnet {subnet}: must be a /24")
    return net


# -- namespaces and links -----------------------------------------------------------------------
def netns_list() -> list[str]:
    """Every network namespace on this machine (`ip netns list`), ours or not."""
    out = run_cmd(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def netns_pids(netns: str) -> list[int]:
    """The processes inside `netns`."""
    out = run_cmd(["ip", "netns", "pids", netns], check=False)
    return [int(p) for p in out.split() if p.isdigit()]


def link_exists(name: str) -> bool:
    """True when the interface exists in the root namespace."""
    return Path("/sys/class/net", name).exists()


def netns_owner(netns: str) -> str | None:
    """The owner a namespace is named after (`rackcert-<owner>-<host>`), if it is one of ours."""
    m = OWNER_RE.match(netns)
    return m["owner"] if m else None


def bridge_owner(name: str) -> str | None:
    """The owner a bridge's alias names (`rackcert-sshhosts owner=<owner>`), if any."""
    alias = bridge_alias(name)
    return alias[len(ALIAS_TAG) :] if alias.startswith(ALIAS_TAG) else None


def bridge_alias(name: str) -> str:
    """The alias a bridge carries (its owner tag), "" if none."""
    try:
        return Path("/sys/class/net", name, "ifalias").read_text().strip()
    except OSError:
        return ""


def create_bridge(subnet: str, owner: str) -> str:
    """Create the subnet's bridge with the gateway address; fail if it already exists."""
    net = parse_subnet(subnet)
    name = bridge_name(subnet)
    proc = subprocess.run(
        ["ip", "link", "add", name, "mtu", str(SWITCH_MTU), "type", "bridge"],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        if "exists" in proc.stderr:
            raise SshHostError(
                f"subnet {subnet} is in use (bridge {name} exists, {bridge_alias(name) or 'no'}"
                " owner); pick another subnet or run rackcert.lab.lifetime.clear_stale()"
            )
        raise SshHostError(f"cannot create bridge {name}: {proc.stderr.strip()}")
    gateway = f"{net.network_address + 1}/{net.prefixlen}"
    run_cmd(["ip", "link", "set", name, "alias", f"{ALIAS_TAG}{owner}"])
    run_cmd(["ip", "addr", "add", gateway, "dev", name])
    run_cmd(["ip", "link", "set", name, "up"])
    return name


def delete_bridge(name: str) -> None:
    """Delete a bridge and the time server on its gateway. Idempotent."""
    timesync.stop_server(RUNTIME_ROOT, name)
    run_cmd(["ip", "link", "del", name], check=False)


def ensure_bridge(subnet: str, owner: str) -> str:
    """The subnet's bridge for `owner`, created if absent (the lab's Slurm controller binds
    its address before any host exists); refused when another owner holds it."""
    name = bridge_name(subnet)
    if not link_exists(name):
        return create_bridge(subnet, owner)
    if bridge_alias(name) != f"{ALIAS_TAG}{owner}":
        raise SshHostError(f"subnet {subnet} belongs to {bridge_alias(name) or 'someone else'}")
    return name


def claim_subnet(owner: str | None = None, *, first: int = 100, last: int = 199) -> str:
    """Claim a free 10.x.y.0/24 (x in first..last) by creating its bridge; returns the subnet.

    Creating a bridge is atomic in the kernel, so two processes can never claim the
    same subnet. Start at a pid-dependent offset so parallel runs rarely probe twice.
    """
    owner = owner or str(os.getpid())
    span = (last - first + 1) * 256
    start = (os.getpid() * 7919 + time.monotonic_ns() // 1000) % span
    for i in range(span):
        slot = (start + i) % span
        subnet = f"10.{first + slot // 256}.{slot % 256}.0/24"
        if link_exists(bridge_name(subnet)) or _subnet_routed(subnet):
            continue
        try:
            create_bridge(subnet, owner)
        except SshHostError:
            continue
        return subnet
    raise SshHostError(f"no free test subnet in 10.{first}-{last}.x.0/24")


def route_device(address: str) -> str | None:
    """The interface the kernel would send `address` through (`ip route get`); None: no route."""
    try:
        out = subprocess.run(
            ["ip", "-4", "route", "get", address],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out[out.index("dev") + 1] if "dev" in out[:-1] else None


def _subnet_routed(subnet: str) -> bool:
    out = run_cmd(["ip", "-4", "route", "show", subnet], check=False)
    return bool(out.strip())


def default_addresses(net: ipaddress.IPv4Network, count: int) -> list[str]:
    """.11, .12, ... of the subnet: where hosts go when no addresses are given."""
    if count > 200:
        raise InputError("at most 200 test hosts per subnet")
    return [str(net.network_address + 11 + i) for i in range(count)]


def plug_netns(netns: str, addr: str, net: ipaddress.IPv4Network, bridge: str, mtu: int) -> None:
    """Create the host's netns and its veth on the bridge, `eth0` inside at `addr` (no process)."""
    if netns in netns_list():
        destroy_netns(netns)
    last = int(ipaddress.IPv4Address(addr)) & 0xFF
    veth, peer = f"rcv{hex_net(net)}{last:02x}", f"rcp{hex_net(net)}{last:02x}"
    run_cmd(["ip", "netns", "add", netns])
    if link_exists(veth):
        run_cmd(["ip", "link", "del", veth], check=False)
    # The "switch" side takes jumbo frames (9216) whatever the host's own MTU, as a
    # data-centre switch does; otherwise a host set to MTU 9000 could not talk at all.
    run_cmd(
        ["ip", "link", "add", veth, "mtu", str(max(SWITCH_MTU, mtu)), "type", "veth"]
        + ["peer", "name", peer, "mtu", str(mtu)]
    )
    run_cmd(["ip", "link", "set", peer, "netns", netns])
    run_cmd(["ip", "link", "set", veth, "master", bridge, "up"])
    for cmd in (
        ["link", "set", "lo", "up"],
        ["link", "set", peer, "name", "eth0"],
        ["link", "set", "eth0", "mtu", str(mtu), "up"],
        ["addr", "add", f"{addr}/{net.prefixlen}", "dev", "eth0"],
        ["route", "add", "default", "via", str(net.network_address + 1)],
    ):
        run_cmd(["ip", "-n", netns, *cmd])


def kill_netns_processes(netns: str, *, timeout: float = 10.0) -> None:
    """SIGKILL every process in `netns` and return once none is left in it.

    A signal is delivered, not obeyed at once: a killed sshd keeps its listening socket until
    the kernel has run its exit (exit_files comes before exit_task_namespaces, so a process
    that has left the netns has closed its sockets). Returning earlier let a connection be
    accepted by a host that was "killed" on a loaded machine. Processes forked meanwhile are
    killed on the next pass.
    """
    deadline = time.monotonic() + timeout
    while True:
        pids = netns_pids(netns)
        if not pids or time.monotonic() > deadline:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def destroy_netns(netns: str) -> None:
    """Kill every process in `netns`, then delete it and its veth pair. Idempotent.

    The veth is deleted explicitly (deleting one end removes the pair at once): left to
    `ip netns del`, the kernel frees the namespace, and the peer on the bridge, later in a
    work queue, so a caller that looks for hosts still attached to the bridge saw a ghost.
    """
    kill_netns_processes(netns)
    run_cmd(["ip", "-n", netns, "link", "del", "eth0"], check=False)
    run_cmd(["ip", "netns", "del", netns], check=False)


def release_subnet(subnet: str) -> None:
    """Delete the subnet's bridge (what `claim_subnet` created). Idempotent."""
    delete_bridge(bridge_name(subnet))


def stop_owner(owner: str, *, bridges: bool = True) -> int:
    """Stop every host (and bridge) of `owner` ("lab" or a pid); returns the hosts removed."""
    count = 0
    for netns in netns_list():
        m = OWNER_RE.match(netns)
        if m and m["owner"] == owner:
            destroy_netns(netns)
            shutil.rmtree(RUNTIME_ROOT / netns, ignore_errors=True)
            count += 1
    for link in bridge_names() if bridges else []:
        if bridge_alias(link) == f"{ALIAS_TAG}{owner}":
            delete_bridge(link)
    return count


def bridge_names() -> list[str]:
    """The test-host bridges on this machine (rcb*), whoever owns them."""
    return [p.name for p in Path("/sys/class/net").glob("rcb*")]
