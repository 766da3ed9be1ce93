"""Fixture: a real Slurm (rackcert.lab.slurm) over two SSH test hosts, nodes joined by the role.

    def test_x(slurm_rack):
        rack = slurm_rack                # .lab (SlurmLab), .hosts, .loaded (spec with slurm)
        rack.lab.client("sinfo")

Session-scoped, shared by tests/integration/test_slurm_lab.py and
tests/integration/test_slurm_localise.py (one
unit of work under xdist, tests/support/plugins/schedule.py's TOGETHER, so one worker sets it up
once): the controller comes up in under a second, but joining the nodes is a real
`rackcert configure --tags slurm` run (ansible-runner over SSH) plus the DL environment's
worker for the srun bench. What the tests change they put back in `finally` (drains
resumed, reservation deleted, HealthCheckProgram and Prolog back to `exit 0`); the one
thing left is the health-check role's /etc/rackcert/rack.yaml on the nodes, which a join
without `slurm.health_check` never reads or writes. Per test process
(owner `<pid>x<n>`): its own directory under /run/rackcert-slurm/, munge socket and key,
controller port on its own bridge address, so runs side by side never meet.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from rackcert.configure.runner import configure
from rackcert.core.runs import RunDir
from rackcert.core.slurm.conf import node_lines
from rackcert.core.spec_loader import LoadedSpec, load_spec
from rackcert.core.stage_records import ConfigureRecord
from rackcert.lab.slurm import NodeDef, SlurmLab, spec_block
from rackcert.lab.sshhosts.host import TestHost
from tests.support.plugins.configure import spec_for_hosts

_COUNTER = itertools.count(1)


@dataclass
class SlurmRack:
    lab: SlurmLab
    hosts: list[TestHost]
    loaded: LoadedSpec
    first_join: ConfigureRecord
    directory: Path

    def run(self, name: str = "runs") -> RunDir:
        return RunDir.create(self.directory / name, "lab", self.loaded.sha256, self.loaded.text)


def free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return int(s.getsockname()[1])


slurm_block = spec_block


def with_slurm(loaded: LoadedSpec, block: dict[str, Any]) -> LoadedSpec:
    data = yaml.safe_load(loaded.text)
    data["slurm"] = block
    data["storage"] = {}  # no data mount on these hosts: storage.mount has nothing to judge
    loaded.path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_spec(loaded.path)


def _cpu_only(data: dict[str, Any]) -> None:
    cpu = {**data["vm_templates"][0], "name": "cpu-only", "gpus": 0}
    cpu.pop("nvlink", None)
    data["vm_templates"].append(cpu)
    for vm in data["vms"]:
        vm["template"] = "cpu-only"


@contextlib.contextmanager
def slurm_rack_of(
    hosts: list[TestHost], directory: Path, *, cpu_only: bool = False
) -> Iterator[SlurmRack]:
    """A real Slurm over `hosts`: controller up, nodes joined by the role, all idle.

    cpu_only: the VMs from a template without GPUs (the lab's two ESXi hosts carry GPUs
    for two 2-GPU VMs only; more nodes than that are CPU nodes)."""
    loaded = spec_for_hosts(hosts, directory, edit=_cpu_only if cpu_only else None)
    gateway = hosts[0].subnet.rsplit(".", 1)[0] + ".1"
    nodes = [
        NodeDef(n.name, n.address, n.cpus, n.memory_mb) for n in node_lines(loaded.spec, gres=False)
    ]
    lab = SlurmLab.for_owner(
        f"{os.getpid()}x{next(_COUNTER)}",
        address=gateway,
        nodes=nodes,
        port=free_port(gateway),
        cluster="lab",
        partition="lab",
        health_check_interval_s=5,  # a no-op until a test puts rackcert's check there
    )
    try:
        lab.start()
        loaded = with_slurm(loaded, slurm_block(lab, job_timeout_s=5))
        run = RunDir.create(directory / "runs", "lab", loaded.sha256, loaded.text)
        joined = configure(loaded, run, tags=["slurm"])
        assert joined.status == "ok", joined.error
        lab.wait_idle([h.name for h in hosts], timeout=30)
        yield SlurmRack(lab, hosts, loaded, joined, directory)
    finally:
        lab.stop()
        for log in lab.directory.glob("*.log"):  # kept beside the test's files, for a failure
            shutil.copy(log, directory / log.name)
        lab.remove()


@pytest.fixture(scope="session")
def slurm_rack(ssh_hosts_session, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmRack]:
    # Nothing hidden: the srun bench runs this checkout's worker with this interpreter, as the
    # SSH bench beside it does (--remote-python, --remote-dir).
    hosts = ssh_hosts_session(["node1", "node2"], private=[])
    with slurm_rack_of(hosts, tmp_path_factory.mktemp("slurm")) as rack:
        yield rack
