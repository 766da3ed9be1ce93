"""Fixture: a real Slurm (rackcert.lab.slurm) over four SSH test hosts, nodes joined by the role.

    def test_x(slurm_rack):
        rack = slurm_rack                # .lab (SlurmLab), .hosts, .loaded (spec with slurm)
        rack.lab.client("sinfo")

One Slurm join per session (issue 55): session-scoped, shared by
tests/integration/test_slurm_lab.py, test_slurm_localise.py, test_upgrade_slurm.py (`slurm_rack`:
node1 and node2, the default partition, the lab's GPU template) and test_bench_localise_srun.py
(`slurm_rack4`: all four as CPU nodes, partition FOUR); one unit of work under xdist
(tests/support/plugins/schedule.py's TOGETHER), so one worker sets it up once. The
controller comes up in under a second, but joining the nodes is a real
`rackcert configure --tags slurm` run (ansible-runner over SSH) plus the DL environment's
worker for the srun bench: one run joins all four. What the tests change they put back in
`finally` (drains resumed, reservation deleted, HealthCheckProgram and Prolog back to
`exit 0`, links unshaped); the one thing left is the health-check role's
/etc/rackcert/rack.yaml on the nodes, which a join without `slurm.health_check` never reads
or writes. A health check a test installs runs on node3 and node4 too (slurmd runs one
program on every node): `only_on` makes it a no-op there. Per test process (owner
`<pid>x<n>`): its own directory under /run/rackcert-slurm/, munge socket and key,
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


def only_on(rack: SlurmRack) -> str:
    """A shell line for a health-check program a test installs: exit 0 on the session
    rack's nodes that are not `rack`'s. slurmd runs one HealthCheckProgram on every node
    (every 5 s here); on node3 and node4 rackcert's check would only start Python to say
    the spec does not name them (~1.3 s of CPU each time, half a core of a 2-core
    machine between them), which slowed the check the test waits for on node1."""
    names = "|".join(h.name for h in rack.hosts)
    return f'case "$SLURMD_NODENAME" in {names}) ;; *) exit 0 ;; esac\n'


def _cpu_only(data: dict[str, Any], first: int = 0) -> None:
    """VMs from `first` on from a template without GPUs (the lab's two ESXi hosts carry
    GPUs for two 2-GPU VMs only; more nodes than that are CPU nodes)."""
    cpu = {**data["vm_templates"][0], "name": "cpu-only", "gpus": 0}
    cpu.pop("nvlink", None)
    data["vm_templates"].append(cpu)
    for vm in data["vms"][first:]:
        vm["template"] = "cpu-only"


@dataclass
class SlurmRacks:
    """Two views of one controller and one join: `pair` is node1 and node2 in the default
    partition (the spec's GPU template, as the lab), `four` all four hosts as CPU nodes in
    partition FOUR (localisation's steps need a third and fourth node to tell a node from a
    link)."""

    pair: SlurmRack
    four: SlurmRack


FOUR = "lab4"


@contextlib.contextmanager
def slurm_racks_of(hosts: list[TestHost], directory: Path) -> Iterator[SlurmRacks]:
    """A real Slurm over four hosts: controller up, every node joined by the role in one
    configure run, all idle; two specs that point at it (SlurmRacks)."""
    assert len(hosts) == 4, hosts
    names = [h.name for h in hosts]
    # The join's spec: node1 and node2 as the pair's spec has them, node3 and node4 CPU nodes.
    joining = spec_for_hosts(hosts, directory / "join", edit=lambda d: _cpu_only(d, first=2))
    gateway = hosts[0].subnet.rsplit(".", 1)[0] + ".1"
    nodes = [
        NodeDef(n.name, n.address, n.cpus, n.memory_mb)
        for n in node_lines(joining.spec, gres=False)
    ]
    lab = SlurmLab.for_owner(
        f"{os.getpid()}x{next(_COUNTER)}",
        address=gateway,
        nodes=nodes,
        port=free_port(gateway),
        cluster="lab",
        partition="lab",
        partition_nodes=names[:2],
        partitions={FOUR: names},
        health_check_interval_s=5,  # a no-op until a test puts rackcert's check there
    )
    try:
        lab.start()
        joining = with_slurm(joining, slurm_block(lab, job_timeout_s=5))
        run = RunDir.create(directory / "runs", "lab", joining.sha256, joining.text)
        joined = configure(joining, run, tags=["slurm"])
        assert joined.status == "ok", joined.error
        lab.wait_idle(names, timeout=30)
        pair = with_slurm(
            spec_for_hosts(hosts[:2], directory / "pair"), slurm_block(lab, job_timeout_s=5)
        )
        four = with_slurm(
            spec_for_hosts(hosts, directory / "four", edit=_cpu_only),
            slurm_block(lab, job_timeout_s=5, partition=FOUR),
        )
        yield SlurmRacks(
            SlurmRack(lab, hosts[:2], pair, joined, directory),
            SlurmRack(lab, hosts, four, joined, directory),
        )
    finally:
        lab.stop()
        for log in lab.directory.glob("*.log"):  # kept beside the test's files, for a failure
            shutil.copy(log, directory / log.name)
        lab.remove()


@pytest.fixture(scope="session")
def slurm_racks(
    ssh_hosts_session, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SlurmRacks]:
    # Nothing hidden: the srun bench runs this checkout's worker with this interpreter, as the
    # SSH bench beside it does (--remote-python, --remote-dir).
    hosts = ssh_hosts_session(["node1", "node2", "node3", "node4"], private=[])
    with slurm_racks_of(hosts, tmp_path_factory.mktemp("slurm")) as racks:
        yield racks


@pytest.fixture(scope="session")
def slurm_rack(slurm_racks: SlurmRacks) -> SlurmRack:
    """node1 and node2, the default partition's (node3 and node4 idle beside them)."""
    return slurm_racks.pair


@pytest.fixture(scope="session")
def slurm_rack4(slurm_racks: SlurmRacks) -> SlurmRack:
    """All four nodes as CPU nodes, partition FOUR (tests/integration/
    test_bench_localise_srun.py)."""
    return slurm_racks.four
