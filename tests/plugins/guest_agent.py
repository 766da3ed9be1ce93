"""Fixture: the lab with its guest agent, on a subnet of its own.

    def test_x(agent_lab):
        lab = agent_lab()                       # twin of inventories/lab.yaml + guest agent
        lab.spec_path, lab.agent.guests         # the spec points at the twin and the subnet
        lab = agent_lab(faults={...})           # any rack_twin keyword

The lab spec's VM addresses and gateway are moved to a /24 claimed for the test
(the agent's hosts live there, owner `<pid>x<n>`), its storage export to the
test's tmp dir, and wait_for stays the spec's (ssh): provision waits for the
hosts the agent brings up. The agent runs in a thread of the test process and
takes its hosts down at teardown.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from rackcert.lab import sshhosts
from rackcert.lab.guest_agent import GuestAgent
from rackcert.spec import Spec
from rackcert.spec_loader import load_spec


@dataclass
class AgentLab:
    twin: Any  # tests.plugins.vcsim.TwinLab
    spec_path: Path
    spec: Spec
    agent: GuestAgent
    runs_dir: Path
    subnet: str

    def connect(self) -> Any:
        return self.twin.connect()


@pytest.fixture
def agent_lab(rack_twin, tmp_path: Path) -> Iterator[Any]:
    made: list[tuple[GuestAgent, Any, str, str]] = []

    def make(**twin_kwargs: Any) -> AgentLab:
        owner = f"{os.getpid()}x{len(made)}g"
        subnet = sshhosts.claim_subnet(owner)
        net = ipaddress.IPv4Network(subnet)
        twin = rack_twin("inventories/lab.yaml", wait_for=None, **twin_kwargs)
        data = yaml.safe_load(twin.spec_path.read_text())
        for i, vm in enumerate(data["vms"]):
            vm["address"] = str(net.network_address + 11 + i)
        data["network"]["management"]["gateway"] = str(net.network_address + 1)
        export = tmp_path / f"export{len(made)}"
        export.mkdir()
        data["storage"]["nfs"]["export"] = str(export)
        data["storage"]["nfs"]["mount_point"] = str(tmp_path / f"mnt-data{len(made)}")
        spec_path = tmp_path / f"lab-agent{len(made)}.yaml"
        spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
        spec = load_spec(spec_path).spec
        agent = GuestAgent(spec, owner=owner, state_dir=tmp_path / f"guests{len(made)}")
        thread = agent.start_thread()
        made.append((agent, thread, owner, subnet))
        return AgentLab(twin, spec_path, spec, agent, twin.runs_dir, subnet)

    try:
        yield make
    finally:
        for agent, thread, owner, subnet in made:
            agent.stop()
            thread.join(timeout=30)
            sshhosts.stop_owner(owner)
            sshhosts.release_subnet(subnet)
