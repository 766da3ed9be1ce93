"""Fixture: the lab with its guest agent, on a subnet of its own.

    def test_x(agent_lab):
        lab = agent_lab()                       # twin of inventories/lab.yaml + guest agent
        lab.spec_path, lab.agent.guests         # the spec points at the twin and the subnet
        lab = agent_lab(faults={...})           # any rack_twin keyword
        lab = agent_lab(wait_for="tools")       # provision waits for Tools, not SSH

rack_twin(guests=True) on the lab spec: the VM addresses and gateway move to a /24
claimed for the test (the agent's hosts live there, owner `<pid>x<n>g`), its storage
export to the test's tmp dir, and wait_for stays the spec's (ssh) unless given:
provision waits for the hosts the agent brings up. The agent runs in a thread of the
test process and takes its hosts down at teardown (rack_twin's).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rackcert.core.spec import Spec
from rackcert.lab.guest_agent import GuestAgent


@dataclass
class AgentLab:
    twin: Any  # tests.support.plugins.vcsim.TwinLab
    spec_path: Path
    spec: Spec
    agent: GuestAgent
    runs_dir: Path
    subnet: str

    def connect(self) -> Any:
        return self.twin.connect()


@pytest.fixture
def agent_lab(rack_twin, tmp_path: Path) -> Iterator[Any]:
    made: list[AgentLab] = []

    def make(*, wait_for: str | None = None, **twin_kwargs: Any) -> AgentLab:
        n = len(made)
        export = tmp_path / f"export{n}"
        export.mkdir()

        def local_storage(data: dict[str, Any]) -> None:
            data["storage"]["nfs"]["export"] = str(export)
            data["storage"]["nfs"]["mount_point"] = str(tmp_path / f"mnt-data{n}")

        twin = rack_twin(
            "inventories/lab.yaml",
            wait_for=wait_for,
            guests=True,
            edit=local_storage,
            **twin_kwargs,
        )
        assert twin.agent is not None
        lab = AgentLab(twin, twin.spec_path, twin.spec, twin.agent, twin.runs_dir, twin.subnet)
        made.append(lab)
        return lab

    yield make
