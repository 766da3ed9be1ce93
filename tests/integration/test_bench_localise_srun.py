"""Issue 34 under Slurm: localisation's measurements as job steps of the lab's real Slurm.

Four SSH test hosts joined to one controller (tests/support/plugins/slurm.py: slurmd in each host's
namespace, as on a rack; the session's one Slurm rack, its 4-node partition), every link
shaped to the lab's line rate (100 Mbit/s) for this module. The node stage is one step on
the four nodes; each round of the link stage is one step per pair on the pair's two nodes,
the round's pairs at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rackcert.core.paths import REPO_ROOT
from rackcert.core.stage_records import LocaliseRecord
from rackcert.lab import linkshape
from rackcert.lab.sshhosts.host import TestHost
from tests.support.bench_localise_lab import LINE_MBIT, named, nodes_of, why
from tests.support.plugins.slurm import SlurmRack
from validation.bench.localisation.stages import LocaliseOptions, localise
from validation.bench.transport import SrunTarget


@pytest.fixture(scope="module")
def rack4(slurm_rack4: SlurmRack) -> Iterator[SlurmRack]:
    """The session's Slurm rack (one join for every Slurm test, issue 55), all four nodes,
    their links at the line rate while this module runs: the other Slurm modules' jobs and
    rolls run on unshaped links, as before."""
    linkshape.shape_hosts(slurm_rack4.hosts, LINE_MBIT / 1000)
    try:
        yield slurm_rack4
    finally:
        for h in slurm_rack4.hosts:
            linkshape.unshape(h)


@contextlib.contextmanager
def quarter_rate(victim: TestHost) -> Iterator[None]:
    """Every link of `victim` at a quarter of the line rate while the block runs."""
    linkshape.shape_host(victim, LINE_MBIT * 0.25)
    try:
        yield
    finally:
        linkshape.shape_host(victim, LINE_MBIT)


def cli(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """One rackcert command as a user runs it, from the repository."""
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=300, cwd=REPO_ROOT, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )  # fmt: skip


def srun_localise(rack: SlurmRack, tmp_path: Path, stages: set[str], **kw: object) -> dict:
    slurm = rack.loaded.spec.slurm
    assert slurm is not None
    target = SrunTarget(partition=slurm.partition, immediate_s=30, client_conf=str(rack.lab.conf))
    opts = LocaliseOptions(
        line_rate_gbps=LINE_MBIT / 1000,
        line_rate_source="the lab's declared line rate",
        pair_seconds=2,
        node_seconds=1.0,
        node_allreduce=False,
        engine="numpy",
        stages=stages,
        timeout_s=120,
        launcher="srun",
        slurm=target,
        **kw,  # type: ignore[arg-type]
    )
    rec = localise(nodes_of(rack.hosts), opts, log=tmp_path / "localise.log")
    LocaliseRecord.model_validate(rec)  # what bench.json's typed `localise` block holds
    return rec


def test_srun_localisation_names_the_slow_link_only(rack4: SlurmRack, tmp_path: Path) -> None:
    # The ring (two rounds of two pairs; round-robin, three rounds, is the CLI test's below):
    # each round costs a torch start per node for its allreduce.
    a, b = rack4.hosts[0], rack4.hosts[1]
    linkshape.shape_link(a, b, LINE_MBIT * 0.5, line=LINE_MBIT)
    try:
        rec = srun_localise(
            rack4, tmp_path, {"nodes", "links"}, pair_allreduce=True, pattern="ring"
        )
    finally:
        for h in (a, b):
            linkshape.unshape(h)
            linkshape.shape_host(h, LINE_MBIT)
    assert named(rec) == ["bench.link[node1<->node2]"], why(rec)
    assert rec["launcher"] == "srun" and rec["engine"] == "iperf3"
    # measured again as its own step (and its allreduce), slow again: kept
    c = rec["confirm"]
    assert "bench.link[node1<->node2]" in c["tried"], c
    assert "bench.link[node1<->node2]" not in c["cleared"], c
    assert ["node1", "node2"] in [p for r in c["rounds"] for p in r], c
    # the pair allreduce as one step per pair too: every link has its busbw
    assert all(p["allreduce"]["error"] is None for p in rec["links"]), rec["links"]
    assert rec["numbers"]["link_allreduce"]["slow"] == ["node1<->node2"], rec["numbers"]
    assert len(rec["links"]) == 4 and all(p["error"] is None for p in rec["links"]), rec["links"]
    slow = next(p for p in rec["links"] if {p["a"], p["b"]} == {"node1", "node2"})
    assert slow["gbps"] < 0.6 * LINE_MBIT / 1000, slow
    # the node stage: one step, every node's CPU measured
    assert [n["node"] for n in rec["nodes"]] == ["node1", "node2", "node3", "node4"]
    assert all(n["error"] is None and n["units"] for n in rec["nodes"]), rec["nodes"]
    log = (tmp_path / "localise.log").read_text()
    # one step on all nodes; a second only where confirmation measured the stage again (a
    # first measurement's compute suspect, cleared: the lab's two cores can differ in work
    # per CPU second for a while, and which nodes share one is the kernel's choice)
    stages = re.findall(r"== srun node stage #(\d+)", log)
    assert stages == ["0"] * (2 if c["nodes_again"] else 1), (stages, c)
    assert set(c["tried"]) - set(c["cleared"]) == {"bench.link[node1<->node2]"}, c
    for i in range(2):  # two rounds, each two steps at once (#0, #1), twice
        assert f"== srun round {i} iperf3 #1 " in log, log[-3000:]
        assert f"== srun round {i} pair allreduce #1 " in log, log[-3000:]
    t = rec["timing"]
    # two steps at once per round: well under four pairs one after another
    assert t["rounds"] == 2 and t["rounds_s"] < 0.75 * t["pairs"] * t["pair_s"], t
    rack4.lab.wait_idle([h.name for h in rack4.hosts], timeout=30)


def test_bench_launcher_srun_makes_localisation_slurm_steps(rack4: SlurmRack) -> None:
    """`bench --localise --launcher srun`: the spec's slurm block says where the steps go."""
    from validation.bench.localisation.stages import options_for
    from validation.bench.options import BenchOptions

    spec = rack4.loaded.spec
    assert spec.slurm is not None
    opts = options_for(spec, BenchOptions(launcher="srun", reservation="maint"))
    assert opts.launcher == "srun"
    assert opts.slurm == SrunTarget(
        partition=spec.slurm.partition,
        reservation="maint",
        immediate_s=spec.slurm.job_timeout_s,
        client_conf=spec.slurm.client_conf,
    )
    assert options_for(spec, BenchOptions()).launcher == "ssh"


def test_cli_localise_under_srun_names_the_slow_node_in_the_verdict(
    rack4: SlurmRack, tmp_path: Path
) -> None:
    """`rackcert bench --launcher srun --localise`: the spec's slurm block, Slurm steps, one
    failed check for the node whose link is at a quarter rate, exit 1."""
    argv = [sys.executable, "-m", "rackcert.cli", "bench", str(rack4.loaded.path),
            "--launcher", "srun", "--vms", "node1,node2,node3,node4",
            "--skip", "allreduce,resnet,storage,rdma", "--localise",
            "--pair-seconds", "2", "--remote-python", "python3",
            "--runs-dir", str(tmp_path / "runs"), "--json"]  # fmt: skip
    with quarter_rate(rack4.hosts[1]):
        proc = cli(argv)
    assert proc.returncode == 1, proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    loc = data["localise"]
    assert loc["launcher"] == "srun" and loc["pair_allreduce"] is False  # CPU nodes: off
    assert [n["node"] for n in loc["nodes"] if n["error"] is None] == [h.name for h in rack4.hosts]
    failed = [c["id"] for c in data["verdict"]["checks"] if c["status"] == "fail"]
    assert failed == ["bench.node[node2]"], data["verdict"]
    rack4.lab.wait_idle([h.name for h in rack4.hosts], timeout=30)


def test_cli_burnin_under_srun_drains_the_node_it_names(rack4: SlurmRack, tmp_path: Path) -> None:
    """`rackcert burnin --launcher srun --drain`: the loads and the pair rounds as Slurm steps;
    the node whose every link is at a quarter rate is named and drained with the finding as
    its reason (the bench's drain path), exit 1. The shortest run: the node watch and the
    pair rounds, no allreduce loop to start."""
    argv = [sys.executable, "-m", "rackcert.cli", "burnin", str(rack4.loaded.path),
            "--launcher", "srun", "--drain", "--quick", "--duration", "10s",
            "--mix", "gpu,pairs", "--remote-python", "python3",
            "--runs-dir", str(tmp_path / "runs"), "--json"]  # fmt: skip
    try:
        with quarter_rate(rack4.hosts[1]):
            proc = cli(argv)
        out = rack4.lab.client("sinfo", "-R", "-h", "-N", "-o", "%N|%E").stdout
        reasons = dict(line.split("|", 1) for line in out.splitlines() if "|" in line)
    finally:
        for h in rack4.hosts:  # what --drain drained, whatever it named
            rack4.lab.scontrol("update", f"nodename={h.name}", "state=resume")
    assert proc.returncode == 1, proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    assert data["launcher"] == "srun" and len(data["pair_rounds"]) == 1, data["pair_rounds"]
    named = [f["id"] for f in data["findings"]]
    assert named == ["burnin.node[node2]"], [f["message"] for f in data["findings"]]
    assert [(d["node"], d["action"]) for d in data["slurm_drains"]] == [("node2", "drain")]
    reason = data["slurm_drains"][0]["reason"]
    assert reason.startswith("rackcert: burnin.node[node2]: pair round at"), reason
    assert "every link slow" in reason and reasons == {"node2": reason}, (reasons, reason)
    rack4.lab.wait_idle([h.name for h in rack4.hosts], timeout=30)
