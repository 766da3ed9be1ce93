"""`rackcert burnin --quick` on real lab hosts: every load at once over shaped links; a clean rack
names nothing, a planted slow link is named alone.

Four SSH test hosts in network namespaces, every link shaped with tc to the lab's 100 Mbit/s
(as `rackcert lab up` does). The burn-in runs what it runs on a rack, on CPUs: the node watch
(a light CPU GEMM; each host's sysfs-like InfiniBand tree read every second), the rack's Gloo
allreduce in a loop, one rank a host, and localisation's pair rounds (iperf3) with that loop
paused (it fills the ring's links: beside it, ring links read 0.59-0.66x of the others). The
fault: an htb class at half rate between two hosts (that link only).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rackcert.core.burnin_record import BurninData
from rackcert.core.paths import REPO_ROOT
from rackcert.core.ssh_target import SshTarget
from rackcert.lab import linkshape
from rackcert.lab.sshhosts.host import TestHost
from tests.support.fake_nvml import write_ib_port
from tests.support.plugins.configure import spec_for_hosts
from validation.bench.burnin.stage import BurninOptions, run_burnin
from validation.bench.localisation.stages import LocaliseOptions
from validation.bench.transport import Node

LINE_MBIT = 100
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def rack(ssh_hosts_module) -> Iterator[list[TestHost]]:  # type: ignore[no-untyped-def]
    hosts = ssh_hosts_module(["b1", "b2", "b3", "b4"])
    linkshape.shape_hosts(hosts, LINE_MBIT / 1000)
    yield hosts


def nodes_of(hosts: list[TestHost]) -> list[Node]:
    return [
        Node(h.name, SshTarget(host=h.address, port=h.port, identity_file=str(h.key_file),
                               known_hosts=str(h.known_hosts)))
        for h in hosts
    ]  # fmt: skip


def burn(hosts: list[TestHost], tmp_path: Path) -> dict[str, Any]:
    sysfs = tmp_path / "sys"
    write_ib_port(sysfs, "mlx5_0", 1, symbol_error=0)
    opts = BurninOptions.quick_of(
        duration_s=24.0,
        python="python3",
        device="cpu",
        sysfs_root=str(sysfs),
        kernel_log=str(tmp_path / "kern.log"),
        allreduce_interval_s=3.0,
        localise=LocaliseOptions(
            stages={"links"}, pair_seconds=2, timeout_s=120, python="python3", confirm=True
        ),
    )
    (tmp_path / "kern.log").write_text("[    1.0] Linux version 6.8.0\n")
    data = run_burnin(nodes_of(hosts), opts, log=tmp_path / "burnin.log")
    BurninData.model_validate(data)  # what burnin.json holds
    return data


def why(data: dict[str, Any]) -> list[str]:
    out = [f["message"] for f in data["findings"]]
    out += [f"{lp['name']}: {lp.get('busbw_gb_s')} {lp.get('error')}" for lp in data["loops"]]
    for r in data["pair_rounds"]:
        out += [f"round at {r['at_s']}: {p}" for p in r["links"]]
    return out


def test_a_clean_lab_names_nothing(rack: list[TestHost], tmp_path: Path) -> None:
    data = burn(rack, tmp_path)
    assert data["findings"] == [], why(data)
    assert data["verdict"] == "PASS"
    assert [n["device"] for n in data["nodes"]] == ["cpu"] * 4, data["nodes"]
    assert all(n["samples"] >= 15 for n in data["nodes"]), data["nodes"]
    (loop,) = data["loops"]
    assert loop["backend"] == "gloo" and len(loop["busbw_gb_s"]) >= 4, loop
    assert len(data["pair_rounds"]) == 1 and len(data["pair_rounds"][0]["links"]) == 6
    # the links were measured with the rack loop paused: its pause spans the round
    (rnd,) = data["pair_rounds"]
    assert rnd["loop_yielded"] is True
    (span,) = loop["paused"]
    assert span[0] <= rnd["wall"][0] and span[1] >= rnd["wall"][1], (span, rnd["wall"])
    series = BurninData.model_validate(data).series()
    assert series["b1"]["counters"]["after"]["ports"]["mlx5_0/1"]["symbol_error"] == 0


def test_a_slow_link_is_named_alone(rack: list[TestHost], tmp_path: Path) -> None:
    linkshape.shape_link(rack[0], rack[2], LINE_MBIT * 0.5, line=LINE_MBIT)
    try:
        data = burn(rack, tmp_path)
    finally:
        for h in (rack[0], rack[2]):
            linkshape.unshape(h)
            linkshape.shape_host(h, LINE_MBIT)
    assert [f["id"] for f in data["findings"]] == ["burnin.link[b1<->b3]"], why(data)
    assert data["findings"][0]["kind"] == "link" and data["verdict"] == "FAIL"


def lab(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed CLI of this checkout, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "rackcert.cli", *args], capture_output=True, text=True,
        timeout=300, cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, check=False,
    )  # fmt: skip


def test_cli_names_a_fault_planted_with_lab_link_on_two_nodes(
    rack: list[TestHost], tmp_path: Path
) -> None:
    """The lab's own shape (two nodes, one link, so no rack median to judge it by: the line
    rate does), through the CLI: `lab link slow` plants the fault, `burnin --quick` names
    that link alone and exits 1, `lab link clear` puts the line rate back."""
    spec = str(spec_for_hosts(rack[:2], tmp_path).path)  # VMs b1 and b2, lab.yaml's rules
    planted = lab("lab", "link", "slow", "b2", "--fraction", "0.5", "--spec", spec)
    try:
        assert planted.returncode == 0, planted.stderr
        assert planted.stdout.startswith("slowed b2: its link at 50 Mbit/s both ways"), planted
        shown = lab("lab", "link", "show", "--spec", spec).stdout
        assert f"b2 ({rack[1].address}): to it 50 Mbit/s; from it 50 Mbit/s" in shown, shown
        # the shortest run: the node watch and one pair round (no allreduce loops to start)
        burnt = lab("burnin", spec, "--quick", "--duration", "10s", "--mix", "gpu,pairs",
                    "--remote-python", "python3", "--known-hosts", str(rack[0].known_hosts),
                    "--runs-dir", str(tmp_path / "runs"), "--json")  # fmt: skip
    finally:
        cleared = lab("lab", "link", "clear", "--spec", spec)
    assert burnt.returncode == 1, burnt.stderr[-2000:]
    data = json.loads(burnt.stdout)
    assert [f["id"] for f in data["findings"]] == ["burnin.link[b1<->b2]"], why(data)
    rule = "0.8 x line rate 0.1 Gb/s, certification.line_rate_gbps"
    assert rule in data["findings"][0]["message"], data["findings"]
    assert data["rules"]["pairs"]["line_rate_gbps"] == LINE_MBIT / 1000, data["rules"]
    assert cleared.returncode == 0 and cleared.stdout.startswith("cleared: b1, b2 at"), cleared
    shown = lab("lab", "link", "show", "--spec", spec).stdout
    assert f"b2 ({rack[1].address}): to it 100 Mbit/s; from it 100 Mbit/s" in shown, shown


def test_lab_link_slows_one_cable_and_show_reads_it_back(
    rack: list[TestHost], tmp_path: Path
) -> None:
    """`lab link slow b1 --to b3`: that cable only (each end's class to the other), as tc
    holds it; `clear` puts every node back at the line rate. No burn-in: tc alone."""

    def cpu_nodes(data: dict[str, Any]) -> None:  # four VMs; the lab's hosts hold two GPU pairs
        data["vm_templates"][0].update(gpus=0, nvlink="none")

    spec = str(spec_for_hosts(rack, tmp_path, edit=cpu_nodes).path)
    try:
        planted = lab("lab", "link", "slow", "b1", "--to", "b3", "--fraction", "0.25",
                      "--spec", spec)  # fmt: skip
        assert planted.returncode == 0 and "b1<->b3: that link at 25 Mbit/s" in planted.stdout
        showing = lab("lab", "link", "show", "--spec", spec)
        shown = showing.stdout.splitlines()
    finally:
        cleared = lab("lab", "link", "clear", "--spec", spec)
    line = "to it 100 Mbit/s; from it 100 Mbit/s"
    assert shown == [
        f"b1 ({rack[0].address}): to it 100 Mbit/s; from it 100 Mbit/s, to b3 25 Mbit/s",
        f"b2 ({rack[1].address}): {line}",
        f"b3 ({rack[2].address}): to it 100 Mbit/s; from it 100 Mbit/s, to b1 25 Mbit/s",
        f"b4 ({rack[3].address}): {line}",
        "line rate 100 Mbit/s (certification.line_rate_gbps)",
    ], showing
    assert cleared.returncode == 0, cleared.stderr
    after = lab("lab", "link", "show", "--spec", spec).stdout.splitlines()
    assert after[:4] == [f"{h.name} ({h.address}): {line}" for h in rack], after
