"""Planted faults in real lab hosts, found by localisation; clean runs name nothing.

Four SSH test hosts in network namespaces, every link shaped with tc to the lab's line
rate (100 Mbit/s, as `rackcert lab up` does). Each fault is planted for one test and
removed after it: tbf at half rate on one host's link (that node is named), an htb class
with a u32 filter between two hosts (that link only), a CPU quota on one host (its
compute), a fake nvidia-smi with one GPU at PCIe Gen3 x8 (that GPU by PCI address).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from rackcert.core.stage_records import LocaliseRecord
from rackcert.lab import linkshape
from rackcert.lab.sshhosts.host import TestHost
from tests.support.bench_localise_lab import LINE_MBIT, named, nodes_of, why
from tests.support.spec_helpers import gateway_on_subnet_of
from validation.bench.localisation.stages import LocaliseOptions, localise

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rack(ssh_hosts_module) -> Iterator[list[TestHost]]:  # type: ignore[no-untyped-def]
    hosts = ssh_hosts_module(["n1", "n2", "n3", "n4"])
    linkshape.shape_hosts(hosts, LINE_MBIT / 1000)
    yield hosts


def run(
    hosts: list[TestHost],
    stages: set[str],
    tmp_path: Path,
    progress: Callable[[str], None] = lambda _m: None,
    **kw: object,
) -> dict:
    opts = LocaliseOptions(
        line_rate_gbps=LINE_MBIT / 1000,
        line_rate_source="the lab's declared line rate",
        pair_seconds=2,
        node_seconds=1.0,
        node_allreduce=False,
        engine="numpy",
        stages=stages,
        timeout_s=120,
        **kw,  # type: ignore[arg-type]
    )
    rec = localise(nodes_of(hosts), opts, log=tmp_path / "localise.log", progress=progress)
    LocaliseRecord.model_validate(rec)  # what bench.json's typed `localise` block holds
    return rec


def test_a_clean_run_names_nothing_and_rounds_set_the_wall_time(rack, tmp_path: Path) -> None:
    """One clean run of both stages. Many clean runs in a row are the benchmark's figure
    (benchmarks/localise.py: false findings over 20 clean runs); the crowded-core test below
    is another run in which nothing but the planted quota may be named."""
    rec = run(rack, {"nodes", "links"}, tmp_path)
    assert named(rec) == [], why(rec)
    assert len(rec["links"]) == 6 and all(p["error"] is None for p in rec["links"]), why(rec)
    assert all(0.8 * 0.1 <= p["gbps"] <= 0.1 for p in rec["links"]), rec["links"]
    t = rec["timing"]
    assert t["rounds"] == 3
    # three rounds of two pairs at once: well under six pairs one after another
    assert t["rounds_s"] < 0.75 * t["pairs"] * t["pair_s"], t


def test_tbf_on_one_hosts_link_names_that_node_only(rack, tmp_path: Path) -> None:
    linkshape.shape_host(rack[1], LINE_MBIT * 0.5)
    try:
        rec = run(rack, {"links"}, tmp_path)
    finally:
        linkshape.shape_host(rack[1], LINE_MBIT)
    assert named(rec) == ["bench.node[n2]"], why(rec)
    assert "every link slow" in rec["findings"][0]["observed"]
    # measured again (its three links), slow again: tried, not cleared
    c = rec["confirm"]
    assert "bench.node[n2]" in c["tried"] and "bench.node[n2]" not in c["cleared"], (c, why(rec))


def test_a_fault_gone_by_the_confirmation_is_cleared_and_recorded(rack, tmp_path: Path) -> None:
    """n2's link at half rate for the first measurement, repaired when the confirmation
    starts (the moment it says so): n2 was a suspect, measured again, and cleared."""
    linkshape.shape_host(rack[1], LINE_MBIT * 0.5)
    repaired: list[str] = []

    def repair(message: str) -> None:
        if "confirm:" in message and not repaired:
            linkshape.shape_host(rack[1], LINE_MBIT)
            repaired.append(message)

    try:
        rec = run(rack, {"links"}, tmp_path, progress=repair)
    finally:
        linkshape.shape_host(rack[1], LINE_MBIT)
    assert repaired and repaired[0].startswith("  confirm: "), repaired  # n2's 3 links, at least
    assert named(rec) == [], why(rec)
    c = rec["confirm"]
    assert all("bench.node[n2]" in c[k] for k in ("first", "tried", "cleared")), (c, why(rec))
    n2 = [p for p in rec["links"] if "n2" in (p["a"], p["b"])]
    assert all(p["first_gbps"] < 0.6 * LINE_MBIT / 1000 for p in n2), n2
    assert all(p["gbps"] >= 0.8 * LINE_MBIT / 1000 for p in n2), n2


def test_htb_on_one_destination_names_that_link_only(rack, tmp_path: Path) -> None:
    linkshape.shape_link(rack[0], rack[2], LINE_MBIT * 0.5, line=LINE_MBIT)
    try:
        rec = run(rack, {"links"}, tmp_path, pattern="round-robin")
    finally:
        for h in (rack[0], rack[2]):
            linkshape.unshape(h)
            linkshape.shape_host(h, LINE_MBIT)
    assert named(rec) == ["bench.link[n1<->n3]"], why(rec)


def test_pair_allreduce_runs_on_every_pair_and_slows_with_the_link(rack, tmp_path: Path) -> None:
    """Each round's pairs also run a two-rank Gloo allreduce at once; its busbw is in the
    link's row and judged like bandwidth: the halved link is the one named, for both.
    (The ring's two rounds: each round costs a torch start per node.)"""
    linkshape.shape_link(rack[0], rack[1], LINE_MBIT * 0.5, line=LINE_MBIT)
    try:
        rec = run(rack, {"links"}, tmp_path, pair_allreduce=True, pattern="ring")
    finally:
        for h in (rack[0], rack[1]):
            linkshape.unshape(h)
            linkshape.shape_host(h, LINE_MBIT)
    assert named(rec) == ["bench.link[n1<->n2]"], why(rec)
    ars = {frozenset((p["a"], p["b"])): p["allreduce"] for p in rec["links"]}
    assert "; two-node allreduce busbw" in rec["findings"][0]["observed"], ars
    assert all(a["error"] is None and a["backend"] == "gloo" for a in ars.values()), ars
    assert all(a["ifname"] == "eth0" for a in ars.values()), ars  # the lab's data interface
    slow = ars.pop(frozenset(("n1", "n2")))["busbw_gb_s"]
    assert slow < 0.7 * min(a["busbw_gb_s"] for a in ars.values()), (slow, ars)
    assert rec["numbers"]["link_allreduce"]["slow"] == ["n1<->n2"]


@contextlib.contextmanager
def crowded_core(busy: list[TestHost], calm: list[TestHost]) -> Iterator[None]:
    """`busy` hosts' processes (and what they start) on one CPU with four busy loops, `calm`
    hosts' on another: the lab's nodes share this machine's cores, and the kernel can queue
    some of them behind other work for a whole probe (a full run's clean localisation once
    named two such nodes' compute at 0.5-0.7x the median)."""
    cpus = sorted(os.sched_getaffinity(0))
    assert len(cpus) >= 2, "the crowded-core test needs two CPUs"
    loops: list[subprocess.Popen] = []

    def pin(hosts: list[TestHost], cpu: set[int]) -> None:
        for pid in (p for h in hosts for p in linkshape.host_pids(h)):
            with contextlib.suppress(OSError):
                os.sched_setaffinity(pid, cpu)

    try:
        pin(busy, {cpus[0]})
        pin(calm, {cpus[1]})
        for _ in range(4):
            loops.append(
                subprocess.Popen(
                    [sys.executable, "-c", "while True: pass"],
                    preexec_fn=lambda: os.sched_setaffinity(0, {cpus[0]}),
                    # a session each: with autogroup scheduling (sched(7)) a core is shared
                    # between sessions, so four loops in one session would weigh as one
                    start_new_session=True,
                )
            )
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
        pin(busy + calm, set(cpus))


def test_a_quota_is_named_and_a_crowded_core_is_not(rack, tmp_path: Path) -> None:
    """n1 and n2 share a core with four busy loops, n3 and n4 share the other; n1 also has a
    CPU quota. n2's probe waits behind the loops for most of its time, so its wall-clock
    GEMM rate is well under the rack's median (about 0.6x when the wall clock judged), yet
    only n1 is named: a CPU unit is judged per second of the node's own time
    (validation.bench.node.probe.OwnTime), in which a quota still counts. (It is also the
    module's planted CPU quota: the one node named is the quota's.)"""
    with crowded_core(rack[:2], rack[2:]), linkshape.cpu_quota(rack[0], 0.05):
        rec = run(rack, {"nodes"}, tmp_path)
    units = {n["node"]: n["units"][0] for n in rec["nodes"]}
    assert units["n2"]["cpu_waited"] > 0.4, units  # the condition this test is about
    assert units["n1"]["cpu_throttled"] > 0.4, units
    assert named(rec) == ["bench.compute[n1]"], why(rec)


def _fake_smi(host: TestHost, config: dict) -> None:
    """The fake nvidia-smi in the host's own /opt and /usr (overlays: this host only)."""
    base = host.path("/opt/fakegpu")
    shutil.copytree(REPO / "tests" / "support" / "fixtures" / "h200", base / "fixtures" / "h200")
    (base / "fakes").mkdir(parents=True)
    shutil.copy(
        REPO / "tests" / "support" / "fakes" / "fake-nvidia-smi", base / "fakes" / "nvidia-smi"
    )
    link = host.path("/usr/local/bin/nvidia-smi")
    link.symlink_to("/opt/fakegpu/fakes/nvidia-smi")
    host.path("/usr/local/bin/fake-nvidia-smi.json").write_text(json.dumps(config))


def _no_fake_smi(host: TestHost) -> None:
    host.path("/usr/local/bin/nvidia-smi").unlink(missing_ok=True)
    host.path("/usr/local/bin/fake-nvidia-smi.json").unlink(missing_ok=True)
    shutil.rmtree(host.path("/opt/fakegpu"), ignore_errors=True)


def test_gpu_at_gen3_x8_names_that_gpu_only(rack, tmp_path: Path) -> None:
    gen3x8 = {"1": {"pcie.link.gen.current": 3, "pcie.link.width.current": 8}}
    try:
        for h in rack:
            _fake_smi(h, {"gpus": 2, "gpu_fields": gen3x8 if h.name == "n2" else {}})
        rec = run(rack, {"nodes"}, tmp_path)
    finally:
        for h in rack:
            _no_fake_smi(h)
    assert named(rec) == ["bench.gpu[n2 0000:1b:00.0]"], why(rec)
    smi = next(n for n in rec["nodes"] if n["node"] == "n2")["smi"]
    assert [(g["pcie_gen"], g["pcie_width"]) for g in smi] == [(5, 16), (3, 8)]


def test_cli_localise_names_a_slow_pair_in_the_verdict(rack, tmp_path: Path) -> None:
    """`rackcert bench --localise` on two of the hosts: the pair's figure, the node stage
    (with the node's own Gloo allreduce), one failed check for the slowed link, exit 1."""
    spec = yaml.safe_load((REPO / "inventories" / "lab.yaml").read_text())
    for vm, h in zip(spec["vms"], rack[:2], strict=True):
        vm.update(address=h.address, ssh_port=h.port)
    gateway_on_subnet_of(spec, rack[0].address)
    spec["guest"]["ssh"] = {"user": "root", "key_file": str(rack[0].key_file)}
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    argv = [
        sys.executable,
        "-m",
        "rackcert.cli",
        "bench",
        str(spec_path),
        "--backend",
        "gloo",
        "--gpus-per-node",
        "1",
        "--skip",
        "allreduce,resnet,storage,rdma",
        "--localise",
        "--pair-seconds",
        "2",
        "--known-hosts",
        str(rack[0].known_hosts),
        "--remote-python",
        "python3",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--json",
    ]
    linkshape.shape_host(rack[1], LINE_MBIT * 0.25)
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=300,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            check=False,
        )
    finally:
        linkshape.shape_host(rack[1], LINE_MBIT)
    assert proc.returncode == 1, proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    loc = data["localise"]
    assert (
        loc["schema"] == 1
        and loc["engine"] == "iperf3"
        and loc["rounds"] == [[["lab-node1", "lab-node2"]]]
    )
    assert all(n["allreduce"]["correct"] for n in loc["nodes"]), loc["nodes"]
    failed = [c["id"] for c in data["verdict"]["checks"] if c["status"] == "fail"]
    # two nodes, one pair: the pair is named (which end is at fault needs a third node)
    assert failed == ["bench.link[lab-node1<->lab-node2]"], data["verdict"]
    assert data["verdict"]["verdict"] == "FAIL"
