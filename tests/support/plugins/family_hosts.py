"""Fixture: SSH test hosts of another OS family (Ubuntu 22.04/24.04, RHEL 9 stand-ins).

    def test_x(family_hosts, fake_family_repos):
        (node,) = family_hosts("rhel-9", ["node1"])   # rackcert.lab.hostfamily on a test host
        node.exec(["rpm", "-q", "redhat-release"])

Each call starts fresh hosts (a journey changes its host's packages) and gives them the
family's identity and package databases; they stop at the end of the test
(`family_hosts_module`: of the module). An EL host gets
the FAKE base image's release package (tests/support/plugins/fake_family_repos.py) through rpm, and
the repositories a RHEL 9 node has configured before rackcert runs: AppStream and EPEL (NVIDIA's
Driver Installation Guide enables EPEL first, for dkms), as FAKE local copies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import pytest

from rackcert.lab import hostfamily
from rackcert.lab.sshhosts.host import TestHost
from tests.support.plugins.fake_family_repos import cached_family_repos
from tests.support.plugins.sshhosts import SshHostFactory

FamilyHosts = Callable[..., list[TestHost]]


def _el_repos(host: TestHost) -> None:
    repos = cached_family_repos().el
    text = "".join(
        f"[{rid}]\nname={name} (FAKE)\nbaseurl=file://{repos / rid}\nenabled=1\ngpgcheck=0\n\n"
        for rid, name in (("appstream", "Red Hat Enterprise Linux 9 - AppStream"),
                          ("epel", "Extra Packages for Enterprise Linux 9")))  # fmt: skip
    host.path("/etc/yum.repos.d/rackcert-fake-base.repo").write_text(text)


def _starter(factory: SshHostFactory) -> FamilyHosts:
    def start(family_id: str, names: Sequence[str] = ("node1",)) -> list[TestHost]:
        fam = hostfamily.family(family_id)
        base = cached_family_repos().base_rpms if fam.package_manager == "dnf" else []
        hosts = factory(list(names))
        for host in hosts:
            hostfamily.make_family(host, family_id, base_rpms=base)
            if fam.package_manager == "dnf":
                _el_repos(host)
        return hosts

    return start


@pytest.fixture
def family_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FamilyHosts]:
    factory = SshHostFactory(tmp_path_factory.mktemp("familyhosts"))
    yield _starter(factory)
    factory.close()


@pytest.fixture(scope="module")
def family_hosts_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FamilyHosts]:
    """The same hosts for a whole module (one set-up that several tests read: the firewalld
    hosts of tests/integration/test_firewalld_hosts.py, the families' journeys run at once
    in tests/integration/test_families_driver.py); they stop after it. The hosts of one
    process need names of their own: a host's network namespace is named for it."""
    factory = SshHostFactory(tmp_path_factory.mktemp("familyhosts_mod"))
    yield _starter(factory)
    factory.close()
