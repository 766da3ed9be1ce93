"""A set of test hosts brought up (namespaces, keys, file system, sshd) and taken down.

Why: a test, the lab or a benchmark asks for N hosts on a subnet and gets them answering SSH,
or gets an SshHostError with nothing left behind; stopping is idempotent, so a fixture's
finaliser and `lab down` can both call it.

Example:
    hosts = start_hosts(["n1", "n2"], claim_subnet(), Path("/tmp/k/id_ed25519"))
    stop_hosts(hosts)
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from rackcert.core.errors import InputError
from rackcert.core.paths import REPO_ROOT
from rackcert.lab import timesync
from rackcert.lab.sshhosts import network, rootfs, sshd
from rackcert.lab.sshhosts.common import RUNTIME_ROOT, SshHostError, tail
from rackcert.lab.sshhosts.host import TestHost


def start_hosts(
    names: Sequence[str],
    subnet: str,
    key_file: Path,
    *,
    owner: str | None = None,
    state_dir: Path | None = None,
    addresses: Sequence[str] | None = None,
    port: int = 22,
    mtu: int = 1500,
    shared: Sequence[Path | str] = (),
    private: Sequence[Path | str] | None = None,
    timeout: float = 15.0,
    disks: Sequence[Path] | None = None,
) -> list[TestHost]:
    """Start one sshd per name in its own namespaces on `subnet` (a /24); wait until each answers.

    Args:
        names: host names (also their hostnames); unique, at most ~40 characters.
        subnet: the /24 the hosts live on; its bridge is created unless `claim_subnet` did.
        key_file: client private key; generated if missing; its .pub is authorized as root.
        owner: namespace owner tag: default this pid; "lab" for the lab.
        state_dir: where host keys, sshd_config, logs and known_hosts go (default: next
            to key_file, in hosts-<owner>/).
        addresses: one per name (default .11, .12, ... of the subnet).
        port: SSH port on each host's address.
        mtu: initial MTU of every host's eth0.
        shared: directories that stay shared between hosts and the machine (created).
        private: directories the hosts must not see (default: the rackcert checkout and
            this interpreter's virtualenv, so nodes use their own environment).
        disks: one directory per name holding the host's files, kept when it stops (default:
            a tmpfs each, gone with the host); the lab's guests keep their disk this way.

    On any failure the hosts started so far are stopped and SshHostError is raised.

    Example:
        hosts = start_hosts(["n1", "n2"], claim_subnet(), Path("/tmp/k/id_ed25519"))
    """
    owner = owner or str(os.getpid())
    net = network.parse_subnet(subnet)
    if len(set(names)) != len(names) or not names:
        raise InputError(f"test host names must be unique and non-empty: {list(names)}")
    addrs = list(addresses) if addresses else network.default_addresses(net, len(names))
    if len(addrs) != len(names):
        raise InputError("one address per test host name")
    if disks is not None and len(disks) != len(names):
        raise InputError("one disk per test host name")
    for a in addrs:
        if ipaddress.IPv4Address(a) not in net or a == str(net.network_address + 1):
            raise InputError(f"test host address {a} is not a host address of {subnet}")
    for tool in ("ip", "unshare", "nsenter", "ssh-keygen", sshd.SSHD):
        if not shutil.which(tool):
            raise SshHostError(f"{tool} not found: install iproute2, util-linux, openssh-server")
    if os.geteuid() != 0:
        raise SshHostError("SSH test hosts need root (network namespaces, mounts)")

    key_file = sshd.ensure_keypair(Path(key_file))
    state_dir = Path(state_dir or key_file.parent / f"hosts-{owner}").expanduser()
    state_dir.mkdir(parents=True, exist_ok=True)
    rootfs.PRIVATE_MNT.mkdir(parents=True, exist_ok=True)
    shared_paths = [Path(p).expanduser().resolve() for p in shared]
    # A VM has its Python installed; a test host shares this machine's. When that lives
    # under /root (pyenv), the fresh home would hide it: keep it shared.
    python_home = Path(sys.base_prefix).resolve()
    if python_home.is_relative_to("/root") and python_home not in shared_paths:
        shared_paths.append(python_home)
    for p in shared_paths:
        p.mkdir(parents=True, exist_ok=True)
    if private is None:
        private = [REPO_ROOT, Path(sys.prefix)] if sys.prefix != sys.base_prefix else [REPO_ROOT]
    hidden = [Path(p).expanduser().resolve() for p in private]
    hidden = [p for p in hidden if p not in shared_paths and p != Path("/")]
    bridge = network.ensure_bridge(subnet, owner)
    timesync.ensure_server(RUNTIME_ROOT, bridge, str(net))

    known_hosts = state_dir / "known_hosts"
    hosts: list[TestHost] = []
    try:
        for name in names:
            sshd.prepare_host_dir(
                state_dir / name, sshd.runtime_dir(owner, name), key_file, addrs, names, port
            )
        sshd.write_known_hosts(known_hosts, state_dir, names, addrs, port)
        for i, (name, addr) in enumerate(zip(names, addrs, strict=True)):
            hosts.append(_start_one(name, addr, port, net, owner, bridge, state_dir, key_file, mtu))
            hosts[-1].known_hosts = known_hosts
            if disks is not None:
                hosts[-1].disk = Path(disks[i])
                hosts[-1].disk.mkdir(parents=True, exist_ok=True, mode=0o755)
            _launch(hosts[-1], shared_paths, hidden)
        deadline = time.monotonic() + timeout
        for host in hosts:
            _wait_ready(host, deadline)
    except BaseException:
        stop_hosts(hosts, delete_bridge=False)
        raise
    (state_dir / "hosts.json").write_text(json.dumps([h.to_dict() for h in hosts], indent=2))
    return hosts


def _start_one(
    name: str,
    addr: str,
    port: int,
    net: ipaddress.IPv4Network,
    owner: str,
    bridge: str,
    state_dir: Path,
    key_file: Path,
    mtu: int,
) -> TestHost:
    """Create the host's netns and its veth on the bridge (no process yet)."""
    netns = f"{network.NETNS_PREFIX}{owner}-{name}"
    network.plug_netns(netns, addr, net, bridge, mtu)
    return TestHost(
        name=name,
        address=addr,
        port=port,
        netns=netns,
        key_file=key_file,
        pid=0,
        subnet=str(net),
        bridge=bridge,
        state_dir=state_dir / name,
        runtime_dir=sshd.runtime_dir(owner, name),
    )


def _launch(host: TestHost, shared: Sequence[Path], private: Sequence[Path] = ()) -> None:
    script = rootfs.setup_script(host.name, host.runtime_dir, shared, private, host.disk)
    log = open(host.state_dir / "launch.log", "wb")  # noqa: SIM115 - owned by the child
    try:
        host._proc = subprocess.Popen(
            ["ip", "netns", "exec", host.netns, "unshare", "--mount", "--uts"]
            + ["--propagation", "private", "/bin/sh", "-c", script],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        log.close()
    host.pid = host._proc.pid


def _wait_ready(host: TestHost, deadline: float) -> None:
    while time.monotonic() < deadline:
        if not host.alive():
            break
        if host.reachable(timeout=0.5) and (host.runtime_dir / "sshd.pid").is_file():
            return
        time.sleep(0.05)
    why = tail(host.state_dir / "launch.log") or tail(host.runtime_dir / "sshd.log")
    state = "exited" if not host.alive() else "did not answer in time"
    raise SshHostError(f"test host {host.name} ({host.address}:{host.port}): sshd {state}: {why}")


def stop_hosts(hosts: Sequence[TestHost], *, delete_bridge: bool = True) -> None:
    """Stop the hosts and remove their namespaces (and their bridge). Idempotent."""
    bridges = set()
    for host in hosts:
        host.kill()
        network.destroy_netns(host.netns)
        if host.runtime_dir != Path():
            shutil.rmtree(host.runtime_dir, ignore_errors=True)
        if host._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                host._proc.wait(timeout=5)
        if host.bridge:
            bridges.add(host.bridge)
    if delete_bridge:
        for bridge in bridges:
            network.delete_bridge(bridge)
