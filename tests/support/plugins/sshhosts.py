"""Fixtures: real SSH test hosts (sshd in network namespaces), see rackcert.lab.sshhosts.

    def test_x(ssh_hosts):
        h1, h2 = ssh_hosts(2)                     # names default to node1, node2
        assert h1.ssh("hostname").stdout == "node1\\n"

    def test_y(ssh_hosts):
        (a,) = ssh_hosts(["alpha"], mtu=1500)     # names, plus any start_hosts keyword

`ssh_hosts` tears its hosts down after the test; `ssh_hosts_module` after the
module (for tests that honestly share one expensive set-up, such as one Ansible
run checked by several assertions); `ssh_hosts_session` at the end of the session
(one set-up shared by several modules). Every call claims its own free /24
(10.100-199.x.0/24, atomically, through the kernel) and names namespaces with
this process's pid, so xdist workers, parallel runs and the lab (10.77.0.0/24,
owner "lab") never collide. Leftovers of crashed runs are removed at start
(tests/support/plugins/lab_lifetime.py).
Needs root; without it the fixtures fail (never skip).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from rackcert.lab.sshhosts.host import TestHost
from rackcert.lab.sshhosts.network import claim_subnet, release_subnet
from rackcert.lab.sshhosts.start import start_hosts, stop_hosts


class SshHostFactory:
    """Starts sets of test hosts on demand and stops all of them at teardown."""

    def __init__(self, base: Path) -> None:
        self._base = base
        self._sets: list[tuple[list[TestHost], str]] = []

    def __call__(self, names: int | Sequence[str], **kwargs: Any) -> list[TestHost]:
        if isinstance(names, int):
            names = [f"node{i + 1}" for i in range(names)]
        subnet = claim_subnet(kwargs.get("owner"))  # a set's bridge is its owner's
        index = len(self._sets)
        try:
            hosts = start_hosts(
                list(names),
                subnet,
                kwargs.pop("key_file", self._base / "id_ed25519"),
                state_dir=kwargs.pop("state_dir", self._base / f"set{index}"),
                **kwargs,
            )
        except BaseException:
            release_subnet(subnet)
            raise
        self._sets.append((hosts, subnet))
        return hosts

    def close(self) -> None:
        for hosts, subnet in self._sets:
            stop_hosts(hosts)
            release_subnet(subnet)
        self._sets.clear()


@pytest.fixture
def ssh_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshHostFactory]:
    factory = SshHostFactory(tmp_path_factory.mktemp("sshhosts"))
    yield factory
    factory.close()


@pytest.fixture(scope="module")
def ssh_hosts_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshHostFactory]:
    factory = SshHostFactory(tmp_path_factory.mktemp("sshhosts_mod"))
    yield factory
    factory.close()


@pytest.fixture(scope="session")
def ssh_hosts_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshHostFactory]:
    """Hosts that several modules share (the Slurm rack of tests/support/plugins/slurm.py)."""
    factory = SshHostFactory(tmp_path_factory.mktemp("sshhosts_session"))
    yield factory
    factory.close()
