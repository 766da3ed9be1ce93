"""Real SSH test hosts: Debian's sshd, each in its own network, mount and UTS namespace.

Why: rackcert's guest layer (Ansible, testinfra, torchrun over SSH) must be tested
against real hosts, not mocks, and the lab needs stand-ins for its VMs. One
machine plays several hosts:

- network: every host has its own netns with one interface `eth0` (a veth) whose
  other end hangs on a bridge in the root namespace. The bridge owns the subnet's
  `.1` and is the hosts' default gateway, so the root namespace reaches every
  host and the hosts reach each other (SSH between peers, rendezvous for
  torch.distributed). The MTU of each host's `eth0` is its own.
- files: /etc, /usr, /var, /opt, /home, /srv and /mnt are overlays whose upper
  layer is a tmpfs private to the host, and /root is a fresh home (Debian's
  default dot files only), so `apt install`, `/root/.ssh`, `/etc/hosts`, mounts
  and dpkg's database are per host and vanish with it; the machine itself is
  never changed by a playbook, and its own dot files (pyenv shims...) do not leak
  in. The rackcert checkout and the controller's virtualenv are hidden (an empty
  tmpfs over each, `private`): a node runs rackcert's bench worker from its own
  environment, as on a real rack. Everything else (/tmp, /run, ...) is shared,
  read-write. `shared` paths stay shared even below an overlaid directory (the lab's
  NFS stand-in).
- the node image's DL framework: where the machine has the lab DL stack
  (LAB_DL_SITE, made by .ci/setup.d/45-lab-dl-stack.sh: torch, torchvision, Horovod),
  each host's system Python sees it through a .pth in its own /usr (as a DL image has
  its framework installed system-wide).
- name: `unshare --uts`, so `hostname` answers the host's own name; /etc/hosts
  lists every host of the set.

Namespaces are named `rackcert-<owner>-<host>`; the owner is the test process's
pid (so parallel runs and xdist workers never collide) or `lab` for the lab.
What dead pids left behind is cleared by rackcert.lab.lifetime.clear_stale (never `lab`).
Needs root, iproute2, util-linux and openssh-server; no kernel modules.

API:
    hosts = start_hosts(["h1", "h2"], "10.201.7.0/24", key_file=tmp / "id_ed25519")
    hosts[0].ssh("hostname")          # -> CompletedProcess, stdout "h1\\n"
    hosts[0].exec(["ip", "link"])     # nsenter, no SSH involved
    hosts[0].path("/etc/hosts")       # the host's own view of a file, from outside
    hosts[1].kill()                   # SIGKILL everything in h2: SSH is refused now
    stop_hosts(hosts)                 # idempotent

    subnet = claim_subnet()           # a free 10.x.y.0/24 for a test (atomic, via the bridge)
    lab = start_lab_hosts(spec)       # the spec's VMs at their addresses, owner "lab"
    stop_lab_hosts()

A TestHost's fields (name, address, port, netns, key_file, pid, user) and
`known_hosts` / `to_dict()` are what an Ansible inventory or a testinfra
connection needs.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rackcert.core.errors import InputError, RackcertError
from rackcert.core.paths import REPO_ROOT
from rackcert.lab import timesync
from rackcert.lab.pids import pid_alive

SSHD = "/usr/sbin/sshd"
SFTP_SERVER = "/usr/lib/openssh/sftp-server"
NETNS_PREFIX = "rackcert-"
LAB_OWNER = "lab"
# Private mount point: each host mounts its own tmpfs here, visible only inside it.
PRIVATE_MNT = Path("/run/rackcert-sshhosts/private")
# What sshd reads and writes (config, host key, pid, log): outside every overlay and
# outside /root, which each host replaces by a fresh home.
RUNTIME_ROOT = Path("/run/rackcert-sshhosts/hosts")
SWITCH_MTU = 9216
LAB_DL_SITE = Path(os.environ.get("RACKCERT_LAB_DL_SITE", "/opt/rackcert-lab/dl-site"))
DL_PTH = "/usr/lib/python3/dist-packages/rackcert-lab-dl.pth"
OVERLAID = ("etc", "usr", "var", "opt", "home", "srv", "mnt")
_ALIAS_TAG = "rackcert-sshhosts owner="
# Owner: "lab", or a pid optionally tagged (`1234x2`) so one process can own separate sets.
OWNER_RE = re.compile(r"^rackcert-(?P<owner>lab|[0-9]+(?:x[0-9a-z]+)?)-(?P<name>.+)$")


class SshHostError(RackcertError):
    """A test host could not be started or stopped; the message says which and why."""


def _run(cmd: Sequence[str], *, check: bool = True, input: str | None = None) -> str:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, input=input, check=False)
    if check and proc.returncode != 0:
        raise SshHostError(f"{shlex.join(cmd)} failed: {proc.stderr.strip() or proc.returncode}")
    return proc.stdout


def _hex_net(net: ipaddress.IPv4Network) -> str:
    return "".join(f"{b:02x}" for b in net.network_address.packed[:3])


def bridge_name(subnet: str) -> str:
    """Bridge of a /24: `rcb` + the first three octets in hex (15-char interface limit)."""
    return "rcb" + _hex_net(_net(subnet))


def _net(subnet: str) -> ipaddress.IPv4Network:
    try:
        net = ipaddress.IPv4Network(subnet, strict=True)
    except ValueError as exc:
        raise InputError(f"test host subnet {subnet!r}: {exc}") from None
    if net.prefixlen != 24:
        raise InputError(f"test host subnet {subnet}: must be a /24")
    return net


@dataclass
class TestHost:
    """One running sshd in its own namespaces; what a client needs to reach it."""

    __test__ = False  # not a pytest test class

    name: str
    address: str
    port: int
    netns: str
    key_file: Path
    pid: int
    user: str = "root"
    subnet: str = ""
    bridge: str = ""
    state_dir: Path = field(default_factory=Path)
    runtime_dir: Path = field(default_factory=Path)
    known_hosts: Path = field(default_factory=Path)
    # Where the host's files live (its overlays' upper layers and /root): None, a tmpfs that
    # vanishes with the host; a directory, a disk that outlives it (a VM's virtual disk).
    disk: Path | None = None
    _proc: subprocess.Popen | None = field(default=None, repr=False, compare=False)

    # -- inspection -------------------------------------------------------------------------
    def alive(self) -> bool:
        """True while the host's sshd (the namespace's first process) runs."""
        if self._proc is not None:
            return self._proc.poll() is None
        return pid_alive(self.pid)

    def routed(self) -> bool:
        """True when the kernel sends the host's address through the host's own bridge.

        Otherwise (its bridge gone, another net claiming the address) a connection would
        leave this machine for whatever answers at that address: never made.
        """
        return bool(self.bridge) and route_device(self.address) == self.bridge

    def reachable(self, timeout: float = 1.0) -> bool:
        """True when a TCP connection to the host's SSH port is accepted (only on its bridge)."""
        if not self.routed():
            return False
        try:
            with socket.create_connection((self.address, self.port), timeout=timeout):
                return True
        except OSError:
            return False

    def path(self, path: str | Path) -> Path:
        """The host's own view of `path`, readable and writable from outside (via /proc)."""
        return Path(f"/proc/{self.pid}/root") / str(path).lstrip("/")

    @property
    def etc_dir(self) -> Path:
        """The host's own /etc (an overlay: writes here change only this host)."""
        return self.path("/etc")

    def ssh_options(self) -> list[str]:
        """Options for OpenSSH clients: this key, this port, host key pinned by known_hosts."""
        return [
            "-i",
            str(self.key_file),
            "-p",
            str(self.port),
            "-o",
            "BatchMode=yes",
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            f"UserKnownHostsFile={self.known_hosts}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "ConnectTimeout=5",
        ]

    def ssh(self, command: str, *, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """Run `command` on the host over real SSH; returns the completed process."""
        if not self.routed():
            raise SshHostError(
                f"{self.name}: {self.address} is not routed through its bridge"
                f" {self.bridge or '(none)'}; not connecting"
            )
        return subprocess.run(
            ["ssh", *self.ssh_options(), "--", f"{self.user}@{self.address}", command],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def exec(self, argv: Sequence[str], *, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """Run argv inside the host's namespaces without SSH (for test setup and inspection)."""
        return subprocess.run(
            ["nsenter", "-t", str(self.pid), "-n", "-m", "-u", "--", *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    # -- faults -----------------------------------------------------------------------------
    def kill(self) -> None:
        """Stop the host abruptly: SIGKILL every process in it; new SSH is refused.

        Open connections die too (their sshd children are killed), so an Ansible
        ControlPersist master notices at its next task.
        """
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        kill_netns_processes(self.netns)
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)

    def link_down(self) -> None:
        """Take the host's link down: packets are dropped, clients time out (not refused)."""
        _run(["ip", "-n", self.netns, "link", "set", "eth0", "down"])

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "address": self.address,
            "port": self.port,
            "netns": self.netns,
            "key_file": str(self.key_file),
            "pid": self.pid,
            "user": self.user,
            "subnet": self.subnet,
            "bridge": self.bridge,
            "state_dir": str(self.state_dir),
            "runtime_dir": str(self.runtime_dir),
            "known_hosts": str(self.known_hosts),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TestHost:
        kwargs = dict(data)
        for key in ("key_file", "state_dir", "runtime_dir", "known_hosts"):
            kwargs[key] = Path(kwargs[key])
        return cls(**kwargs)


# -- namespaces and links -----------------------------------------------------------------------
def netns_list() -> list[str]:
    out = _run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def netns_pids(netns: str) -> list[int]:
    out = _run(["ip", "netns", "pids", netns], check=False)
    return [int(p) for p in out.split() if p.isdigit()]


def link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def netns_owner(netns: str) -> str | None:
    """The owner a namespace is named after (`rackcert-<owner>-<host>`), if it is one of ours."""
    m = OWNER_RE.match(netns)
    return m["owner"] if m else None


def bridge_owner(name: str) -> str | None:
    """The owner a bridge's alias names (`rackcert-sshhosts owner=<owner>`), if any."""
    alias = _bridge_alias(name)
    return alias[len(_ALIAS_TAG) :] if alias.startswith(_ALIAS_TAG) else None


def _bridge_alias(name: str) -> str:
    try:
        return Path("/sys/class/net", name, "ifalias").read_text().strip()
    except OSError:
        return ""


def _create_bridge(subnet: str, owner: str) -> str:
    """Create the subnet's bridge with the gateway address; fail if it already exists."""
    net = _net(subnet)
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
                f"subnet {subnet} is in use (bridge {name} exists, {_bridge_alias(name) or 'no'}"
                " owner); pick another subnet or run rackcert.lab.lifetime.clear_stale()"
            )
        raise SshHostError(f"cannot create bridge {name}: {proc.stderr.strip()}")
    gateway = f"{net.network_address + 1}/{net.prefixlen}"
    _run(["ip", "link", "set", name, "alias", f"{_ALIAS_TAG}{owner}"])
    _run(["ip", "addr", "add", gateway, "dev", name])
    _run(["ip", "link", "set", name, "up"])
    return name


def _delete_bridge(name: str) -> None:
    """Delete a bridge and the time server on its gateway. Idempotent."""
    timesync.stop_server(RUNTIME_ROOT, name)
    _run(["ip", "link", "del", name], check=False)


def ensure_bridge(subnet: str, owner: str) -> str:
    """The subnet's bridge for `owner`, created if absent (the lab's Slurm controller binds
    its address before any host exists); refused when another owner holds it."""
    name = bridge_name(subnet)
    if not link_exists(name):
        return _create_bridge(subnet, owner)
    if _bridge_alias(name) != f"{_ALIAS_TAG}{owner}":
        raise SshHostError(f"subnet {subnet} belongs to {_bridge_alias(name) or 'someone else'}")
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
            _create_bridge(subnet, owner)
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
    out = _run(["ip", "-4", "route", "show", subnet], check=False)
    return bool(out.strip())


# -- keys and files -----------------------------------------------------------------------------
def ensure_keypair(key_file: Path) -> Path:
    """An ed25519 key pair at key_file (and key_file.pub); generated once, then reused."""
    key_file = Path(key_file).expanduser()
    if not key_file.is_file() or not key_file.with_suffix(key_file.suffix + ".pub").is_file():
        key_file.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            key_file.unlink()
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rackcert", "-f", str(key_file)])
    key_file.chmod(0o600)
    return key_file


def _pub(key_file: Path) -> str:
    return Path(str(key_file) + ".pub").read_text().strip()


def _sshd_config(host_dir: Path, address: str, port: int) -> str:
    return "\n".join(
        [
            f"ListenAddress {address}:{port}",
            f"HostKey {host_dir / 'ssh_host_ed25519_key'}",
            f"PidFile {host_dir / 'sshd.pid'}",
            f"AuthorizedKeysFile {host_dir / 'authorized_keys'} .ssh/authorized_keys",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes no",
            "PrintMotd no",
            "UseDNS no",
            "MaxStartups 64:30:128",
            "MaxSessions 64",
            "AcceptEnv LANG LC_*",
            f"Subsystem sftp {SFTP_SERVER}",
            "",
        ]
    )


def _setup_script(
    name: str,
    host_dir: Path,
    shared: Sequence[Path],
    private: Sequence[Path] = (),
    disk: Path | None = None,
) -> str:
    """Shell run inside the new namespaces, then replaced by sshd (same pid).

    `disk`: the host's files (overlay upper layers, /root) on that directory instead of a
    tmpfs, so a host started again over the same disk finds what it left there, as a VM
    powered on again finds its virtual disk as it was (packages, configuration)."""
    mnt = shlex.quote(str(PRIVATE_MNT))
    if disk is None:
        lines = ["set -e", f"mount -t tmpfs -o mode=0755 rackcert-host {mnt}"]
    else:
        lines = ["set -e", f"mount --bind {shlex.quote(str(disk))} {mnt}"]
    for i, path in enumerate(shared):
        stage = f"{mnt}/shared{i}"
        lines += [f"mkdir -p {stage}", f"mount --bind {shlex.quote(str(path))} {stage}"]
    for d in OVERLAID:
        up, wk = f"{mnt}/upper/{d}", f"{mnt}/work/{d}"
        lines += [
            f"mkdir -p {up} {wk}",
            f"mount -t overlay overlay -o lowerdir=/{d},upperdir={up},workdir={wk} /{d}",
        ]
    # A VM's image has no CUDA toolkit until the cuda role installs the spec's (only where a
    # GPU is): this machine's own toolkit under /usr/local must not stand in for it.
    lines += [
        'for d in /usr/local/cuda-*; do if [ -d "$d" ] && [ ! -L "$d" ]; then'
        ' mount -t tmpfs -o mode=0755,size=1m rackcert-private "$d"; fi; done',
        "rm -f /usr/local/cuda",
        "if grep -qs /usr/local/cuda- /usr/local/bin/nvcc; then rm -f /usr/local/bin/nvcc; fi",
    ]
    # The fresh home first, so shared paths below /root (a Python under ~/.pyenv) stay visible.
    lines += [
        f"mkdir -p {mnt}/root && mount --bind {mnt}/root /root && chmod 0700 /root",
        "cp /usr/share/base-files/dot.bashrc /root/.bashrc 2>/dev/null || true",
        "cp /usr/share/base-files/dot.profile /root/.profile 2>/dev/null || true",
    ]
    # Hidden before the shared paths move in, so a shared path below a private one stays.
    for path in private:
        p = shlex.quote(str(path))
        lines.append(
            f"if [ -d {p} ]; then mount -t tmpfs -o mode=0755,size=1m rackcert-private {p}; fi"
        )
    for i, path in enumerate(shared):
        p = shlex.quote(str(path))
        lines += [f"mkdir -p {p}", f"mount --move {mnt}/shared{i} {p}"]
    # `ip netns exec` remounted /sys for the netns, without the machine's cgroup mounts that
    # a booted VM has (slurmd dies without them): the same layout again, best effort.
    lines += [f"{{ {cmd}; }} 2>/dev/null || true" for cmd in cgroup_mount_commands()]
    site = shlex.quote(str(LAB_DL_SITE))
    lines.append(
        f"if [ -d {site} ] && [ -d {Path(DL_PTH).parent} ]; then echo {site} > {DL_PTH}; fi"
    )
    lines += [
        f"hostname {shlex.quote(name)}",
        f"echo {shlex.quote(name)} > /etc/hostname",
        f"cat {shlex.quote(str(host_dir / 'hosts'))} > /etc/hosts",
        # The machine's resolver is unreachable from the host's netns: fail fast, not in 20 s.
        "rm -f /etc/resolv.conf",
        "echo 'nameserver 127.0.0.1' > /etc/resolv.conf",
        timesync.host_start_command(host_dir / "chrony.conf"),
        "mkdir -p /run/sshd",
        f"exec {SSHD} -D -f {shlex.quote(str(host_dir / 'sshd_config'))}"
        f" -E {shlex.quote(str(host_dir / 'sshd.log'))}",
    ]
    return "\n".join(lines)


def cgroup_mount_commands() -> list[str]:
    """Mount commands that repeat this machine's mounts at and below /sys/fs/cgroup."""
    out: list[str] = []
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return out
    for line in mounts:
        dev, where, fstype, opts = line.split()[:4]
        if where == "/sys/fs/cgroup":
            option = " -o mode=755" if fstype == "tmpfs" else ""
            out.append(f"mount -t {fstype}{option} {shlex.quote(dev)} /sys/fs/cgroup")
        elif where.startswith("/sys/fs/cgroup/"):
            keep = ",".join(o for o in opts.split(",") if o not in ("rw", "relatime"))
            option = f" -o {shlex.quote(keep)}" if keep else ""
            out.append(
                f"mkdir -p {shlex.quote(where)} && mount -t {fstype}{option}"
                f" {shlex.quote(dev)} {shlex.quote(where)}"
            )
    return out


def _hosts_file(pairs: Sequence[tuple[str, str]]) -> str:
    base = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
    return base + "".join(f"{addr}\t{name}\n" for name, addr in pairs)


def _default_addresses(net: ipaddress.IPv4Network, count: int) -> list[str]:
    if count > 200:
        raise InputError("at most 200 test hosts per subnet")
    return [str(net.network_address + 11 + i) for i in range(count)]


# -- start and stop -----------------------------------------------------------------------------
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
    net = _net(subnet)
    if len(set(names)) != len(names) or not names:
        raise InputError(f"test host names must be unique and non-empty: {list(names)}")
    addrs = list(addresses) if addresses else _default_addresses(net, len(names))
    if len(addrs) != len(names):
        raise InputError("one address per test host name")
    if disks is not None and len(disks) != len(names):
        raise InputError("one disk per test host name")
    for a in addrs:
        if ipaddress.IPv4Address(a) not in net or a == str(net.network_address + 1):
            raise InputError(f"test host address {a} is not a host address of {subnet}")
    for tool in ("ip", "unshare", "nsenter", "ssh-keygen", SSHD):
        if not shutil.which(tool):
            raise SshHostError(f"{tool} not found: install iproute2, util-linux, openssh-server")
    if os.geteuid() != 0:
        raise SshHostError("SSH test hosts need root (network namespaces, mounts)")

    key_file = ensure_keypair(Path(key_file))
    state_dir = Path(state_dir or key_file.parent / f"hosts-{owner}").expanduser()
    state_dir.mkdir(parents=True, exist_ok=True)
    PRIVATE_MNT.mkdir(parents=True, exist_ok=True)
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
    bridge = bridge_name(subnet)
    if not link_exists(bridge):
        _create_bridge(subnet, owner)
    elif _bridge_alias(bridge) != f"{_ALIAS_TAG}{owner}":
        raise SshHostError(f"subnet {subnet} belongs to {_bridge_alias(bridge) or 'someone else'}")
    timesync.ensure_server(RUNTIME_ROOT, bridge, str(net))

    known_hosts = state_dir / "known_hosts"
    hosts: list[TestHost] = []
    try:
        for name in names:
            _prepare_host_dir(
                state_dir / name, _runtime_dir(owner, name), key_file, addrs, names, port
            )
        known_hosts.write_text(
            "".join(
                f"{_known_host_name(a, port)} {_host_pub(state_dir / n)}\n"
                + f"{_known_host_name(n, port)} {_host_pub(state_dir / n)}\n"
                for n, a in zip(names, addrs, strict=True)
            )
        )
        for i, (name, addr) in enumerate(zip(names, addrs, strict=True)):
            hosts.append(
                _start_one(name, addr, port, net, owner, bridge, i, state_dir, key_file, mtu)
            )
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


def _known_host_name(name: str, port: int) -> str:
    return name if port == 22 else f"[{name}]:{port}"


def _host_pub(host_dir: Path) -> str:
    return " ".join((host_dir / "ssh_host_ed25519_key.pub").read_text().split()[:2])


def _runtime_dir(owner: str, name: str) -> Path:
    return RUNTIME_ROOT / f"{NETNS_PREFIX}{owner}-{name}"


def _prepare_host_dir(
    host_dir: Path,
    rt: Path,
    key_file: Path,
    addrs: list[str],
    names: Sequence[str],
    port: int,
) -> None:
    """Host key kept in host_dir (stable across restarts); sshd's files written to rt."""
    host_dir.mkdir(parents=True, exist_ok=True)
    hk = host_dir / "ssh_host_ed25519_key"
    if not hk.is_file():
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", host_dir.name, "-f", str(hk)])
    shutil.rmtree(rt, ignore_errors=True)
    rt.mkdir(parents=True, mode=0o700)
    shutil.copy2(hk, rt / hk.name)
    (rt / hk.name).chmod(0o600)
    (rt / "authorized_keys").write_text(_pub(key_file) + "\n")
    (rt / "hosts").write_text(_hosts_file(list(zip(names, addrs, strict=True))))
    idx = list(names).index(host_dir.name)
    (rt / "sshd_config").write_text(_sshd_config(rt, addrs[idx], port))
    subnet = str(ipaddress.IPv4Network(f"{addrs[idx]}/24", strict=False))
    (rt / "chrony.conf").write_text(timesync.client_config(subnet, rt / "chronyd.pid"))


def _start_one(
    name: str,
    addr: str,
    port: int,
    net: ipaddress.IPv4Network,
    owner: str,
    bridge: str,
    index: int,
    state_dir: Path,
    key_file: Path,
    mtu: int,
) -> TestHost:
    """Create the host's netns and its veth on the bridge (no process yet)."""
    netns = f"{NETNS_PREFIX}{owner}-{name}"
    if netns in netns_list():
        destroy_netns(netns)
    last = int(ipaddress.IPv4Address(addr)) & 0xFF
    veth, peer = f"rcv{_hex_net(net)}{last:02x}", f"rcp{_hex_net(net)}{last:02x}"
    _run(["ip", "netns", "add", netns])
    if link_exists(veth):
        _run(["ip", "link", "del", veth], check=False)
    # The "switch" side takes jumbo frames (9216) whatever the host's own MTU, as a
    # data-centre switch does; otherwise a host set to MTU 9000 could not talk at all.
    _run(
        ["ip", "link", "add", veth, "mtu", str(max(SWITCH_MTU, mtu)), "type", "veth"]
        + ["peer", "name", peer, "mtu", str(mtu)]
    )
    _run(["ip", "link", "set", peer, "netns", netns])
    _run(["ip", "link", "set", veth, "master", bridge, "up"])
    for cmd in (
        ["link", "set", "lo", "up"],
        ["link", "set", peer, "name", "eth0"],
        ["link", "set", "eth0", "mtu", str(mtu), "up"],
        ["addr", "add", f"{addr}/{net.prefixlen}", "dev", "eth0"],
        ["route", "add", "default", "via", str(net.network_address + 1)],
    ):
        _run(["ip", "-n", netns, *cmd])
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
        runtime_dir=_runtime_dir(owner, name),
    )


def _launch(host: TestHost, shared: Sequence[Path], private: Sequence[Path] = ()) -> None:
    script = _setup_script(host.name, host.runtime_dir, shared, private, host.disk)
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
    why = _tail(host.state_dir / "launch.log") or _tail(host.runtime_dir / "sshd.log")
    state = "exited" if not host.alive() else "did not answer in time"
    raise SshHostError(f"test host {host.name} ({host.address}:{host.port}): sshd {state}: {why}")


def _tail(path: Path, lines: int = 3) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


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
    _run(["ip", "-n", netns, "link", "del", "eth0"], check=False)
    _run(["ip", "netns", "del", netns], check=False)


def stop_hosts(hosts: Sequence[TestHost], *, delete_bridge: bool = True) -> None:
    """Stop the hosts and remove their namespaces (and their bridge). Idempotent."""
    bridges = set()
    for host in hosts:
        host.kill()
        destroy_netns(host.netns)
        if host.runtime_dir != Path():
            shutil.rmtree(host.runtime_dir, ignore_errors=True)
        if host._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                host._proc.wait(timeout=5)
        if host.bridge:
            bridges.add(host.bridge)
    if delete_bridge:
        for bridge in bridges:
            _delete_bridge(bridge)


def release_subnet(subnet: str) -> None:
    """Delete the subnet's bridge (what `claim_subnet` created). Idempotent."""
    _delete_bridge(bridge_name(subnet))


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
        if _bridge_alias(link) == f"{_ALIAS_TAG}{owner}":
            _delete_bridge(link)
    return count


def bridge_names() -> list[str]:
    """The test-host bridges on this machine (rcb*), whoever owns them."""
    return [p.name for p in Path("/sys/class/net").glob("rcb*")]


# -- the lab ------------------------------------------------------------------------------------
def lab_state_dir(spec: Any) -> Path:
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
        attached = _run(["ip", "-o", "link", "show", "master", bridge], check=False).strip()
        mine = link_exists(bridge) and _bridge_alias(bridge) == f"{_ALIAS_TAG}{owner}"
        if mine and not attached:
            _delete_bridge(bridge)
    return count
