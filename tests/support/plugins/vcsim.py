"""Fixtures: the vcsim rack twin, built once per session, one process per test.

    def test_x(rack_twin):
        lab = rack_twin()                                  # twin of inventories/r750xa-4node.yaml
        lab = rack_twin("inventories/lab.yaml", vms=[...], faults={"fail": [...]})
        lab = rack_twin(desc={"reboot": {"connected_ms": 300, "down_ms": 900}})  # any key
        lab = rack_twin(host_desc={"esx01.example.internal": {"maintenance": True}})  # "*": all
        lab = rack_twin(..., templates=[])                 # the spec's template is missing
        lab = rack_twin(guests=True)                       # + the lab's guest agent (lab.agent)
        main(["plan", str(lab.spec_path), "--json"])       # the spec now points at the twin
        with lab.connect() as si: ...                      # a separate pyVmomi session

Each call starts its own twin on a free loopback port (the OS picks it), with
its own password file and self-signed certificate under the test's tmp_path,
so xdist workers never collide. `tls` picks how the spec trusts it: "ca"
(tls.ca_file, the default), "thumbprint" (SHA-256 pinning) or "insecure"
(tls.verify: false). The Go build is cached under ~/.cache/rackcert/vcsim,
keyed by the sources' hash, and guarded by a file lock.

A VM the twin powers on has no guest: VMware Tools report nothing, SSH never answers, and
provision's wait for it fails (in seconds: boot_timeout_s is cut to NO_GUEST_BOOT_S). With
`guests=True` the lab's guest agent (rackcert.lab.guest_agent) plays the guests: the spec's VM
addresses and gateway move to a /24 claimed for the test, and each powered-on VM becomes an
SSH test host whose Tools report its address to the twin once SSH answers.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from rackcert.core.paths import REPO_ROOT
from rackcert.core.spec import Spec
from rackcert.core.spec_loader import load_spec
from rackcert.lab import twin
from rackcert.lab.guest_agent import GuestAgent
from rackcert.lab.sshhosts.network import claim_subnet, release_subnet, stop_owner


@dataclass
class TwinLab:
    """A running twin and a spec file whose vcenter block points at it."""

    twin: twin.Twin
    spec_path: Path
    spec: Spec
    runs_dir: Path
    # Handler panics a test provokes on purpose (faults={"panic": ...}); any other fails it.
    expected_panics: int = 0
    agent: GuestAgent | None = None  # guests=True: the lab's guest agent, in a thread
    subnet: str = ""  # guests=True: the /24 its SSH hosts live on

    def connect(self) -> Any:
        from provision.session import connect

        return connect(self.spec)

    def with_vcenter(self, name: str, **changes: Any) -> Path:
        """Another spec file for the same twin with vcenter keys changed (tls: {...} merges)."""
        data = yaml.safe_load(self.spec_path.read_text())
        tls = changes.pop("tls", None)
        data["vcenter"].update(changes)
        if tls is not None:
            data["vcenter"]["tls"] = tls
        path = self.spec_path.with_name(name)
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path


# A wait for a guest that cannot boot (no guests=True) fails in seconds, not the spec's minutes.
NO_GUEST_BOOT_S = 2


class TwinFactory:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.running: list[twin.Twin] = []
        self.labs: list[TwinLab] = []
        self.agents: list[tuple[GuestAgent, threading.Thread, str, str]] = []

    def __call__(
        self,
        spec: str | Path = "inventories/r750xa-4node.yaml",
        *,
        vms: list[dict[str, Any]] | None = None,
        faults: dict[str, Any] | None = None,
        tls: str = "ca",
        hosts: int | None = None,
        desc: dict[str, Any] | None = None,
        host_desc: dict[str, dict[str, Any]] | None = None,
        templates: list[dict[str, Any]] | None = None,
        wait_for: str | None = "tools",
        guests: bool = False,
        edit: Callable[[dict[str, Any]], None] | None = None,
    ) -> TwinLab:
        workdir = self.base / f"twin{len(self.running)}"
        files = twin.TwinFiles.in_dir(workdir)
        source = Path(spec) if Path(spec).is_absolute() else REPO_ROOT / spec
        loaded = load_spec(source).spec
        if hosts is None:
            description = twin.description_from_spec(
                loaded, files, port=0, vms=vms, faults=faults, templates=templates
            )
        else:
            description = twin.synthetic_description(hosts, loaded, files)
        description["tls"] = True
        description |= desc or {}
        for host in description["hosts"]:
            host |= (host_desc or {}).get("*", {}) | (host_desc or {}).get(host["name"], {})
        started = twin.start(description, files)
        self.running.append(started)
        data = yaml.safe_load(source.read_text())
        vcenter = data["vcenter"]
        vcenter.update(
            host="127.0.0.1",
            port=started.port,
            protocol="https",
            password_file=str(files.password_file),
        )
        vcenter.pop("password_env", None)
        # The site's key pair for the guests (cloud-init user-data authorizes its .pub).
        # A spec whose key pair exists (a test's SSH hosts) keeps it.
        ssh = data.setdefault("guest", {}).setdefault("ssh", {})
        have = Path(ssh.get("key_file") or "/nonexistent").expanduser()
        if not Path(str(have) + ".pub").is_file():
            key = workdir / "id_ed25519"
            if not key.is_file():
                subprocess.run(
                    ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True
                )
            ssh["key_file"] = str(key)
        # What provision waits for (wait_for=None: the spec's). Without guests nothing
        # answers, so a wait ends in NO_GUEST_BOOT_S.
        net = data.setdefault("network", {}).setdefault("management", {})
        if wait_for is not None:
            net["wait_for"] = wait_for
        subnet = owner = ""
        if guests:
            owner = f"{os.getpid()}x{len(self.running)}g"
            subnet = claim_subnet(owner)
            block = ipaddress.IPv4Network(subnet)
            for i, vm in enumerate(data["vms"]):
                vm["address"] = str(block.network_address + 11 + i)
            net["gateway"] = str(block.network_address + 1)
            net["prefix"] = 24
        else:
            net["boot_timeout_s"] = NO_GUEST_BOOT_S
        if edit is not None:
            edit(data)
        vcenter["tls"] = {
            "ca": {"verify": True, "ca_file": str(files.cert_file)},
            "thumbprint": {"verify": True, "thumbprint": started.thumbprint},
            "insecure": {"verify": False},
        }[tls]
        spec_path = workdir / source.name
        spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
        lab = TwinLab(started, spec_path, load_spec(spec_path).spec, workdir / "runs")
        self.labs.append(lab)
        if guests:
            # Its events reach pytest's "Captured log" of a failing test.
            logging.getLogger("rackcert.lab.guest_agent").setLevel(logging.INFO)
            lab.agent = GuestAgent(lab.spec, owner=owner, state_dir=workdir / "guests")
            lab.subnet = subnet
            self.agents.append((lab.agent, lab.agent.start_thread(), owner, subnet))
        return lab

    def stop_all(self) -> None:
        for agent, thread, owner, subnet in self.agents:
            agent.stop()
            thread.join(timeout=30)
            stop_owner(owner)
            release_subnet(subnet)
        for running in self.running:
            running.stop()

    def unexpected_panics(self) -> list[str]:
        """Handler panics beyond those a test provoked, over all the twins it started."""
        out: list[str] = []
        for lab in self.labs:
            found = twin.handler_panics(lab.twin.files.workdir)
            out += found[lab.expected_panics :]
        return out


@pytest.fixture(scope="session")
def vcsim_binary() -> Path:
    """The twin binary, built once (and cached across sessions)."""
    return twin.build()


@pytest.fixture
def rack_twin(tmp_path: Path, vcsim_binary: Path) -> Iterator[TwinFactory]:
    factory = TwinFactory(tmp_path)
    try:
        yield factory
    finally:
        factory.stop_all()
    # A twin bug must not pass for a flaky network: any handler panic fails the test (at
    # teardown, so the session fails too), with the twin's own log line.
    panics = factory.unexpected_panics()
    if panics:
        pytest.fail(f"the twin's SOAP handler panicked {len(panics)} time(s): {panics[0]}")
