"""One test host: a running sshd in its own namespaces, what a client needs to reach it.

Why: tests, the lab and benchmarks hold hosts as values (an Ansible inventory, a testinfra
connection and the lab's hosts.json are made from the fields), ask them questions (alive,
routed, reachable), run commands on them (over SSH, or nsenter for setup) and break them
(kill, link down) as a VM breaks.

Example:
    host.ssh("hostname").stdout       # "n1\\n", over real SSH
    host.path("/etc/hosts")           # the host's own file, from outside (via /proc)
    host.kill()                       # SSH is refused from now on
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rackcert.lab.pids import pid_alive
from rackcert.lab.sshhosts.common import SshHostError, run_cmd
from rackcert.lab.sshhosts.network import kill_netns_processes, route_device


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
        run_cmd(["ip", "-n", self.netns, "link", "set", "eth0", "down"])

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON types (the lab's hosts.json, an inventory)."""
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
        """The host `to_dict` wrote (its process is not attached: `alive` asks the pid)."""
        kwargs = dict(data)
        for key in ("key_file", "state_dir", "runtime_dir", "known_hosts"):
            kwargs[key] = Path(kwargs[key])
        return cls(**kwargs)
