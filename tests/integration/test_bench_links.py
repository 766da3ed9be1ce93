"""Thresholds that know the link: each allreduce launch is judged against what it crossed.

The node's topology comes from the worker's own probe (validation.bench.node.environment) run
against the fake nvidia-smi of a VM with two bridged A100s (NV12) and of one with two
unbridged A100s (SYS): the same stand-ins the discovery tests use (tests/support/fakes/, a GPU
cannot exist here). The bus ids are the fakes' guest addresses.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from rackcert.core.spec import Certification
from rackcert.core.stage_records import BenchLaunch
from tests.support.paths import FAKES
from validation.bench import links, verdict
from validation.bench.launch import here
from validation.bench.node import environment
from validation.bench.options import Engine
from validation.bench.orchestrate import launch_entry
from validation.bench.units.allreduce import allreduce_result

BUS = ["00000000:13:00.0", "00000000:1b:00.0"]
NCCL = Engine("torch", "cuda", "nccl")


@pytest.fixture
def node_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The worker's topology probe on a node whose nvidia-smi is the named fake."""

    def probe(fake: str) -> dict[str, Any]:
        bin_dir = tmp_path / fake
        bin_dir.mkdir()
        shutil.copy(FAKES / fake, bin_dir / "nvidia-smi")
        (bin_dir / "nvidia-smi").chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
        return environment.gpu_topology()

    return probe


def _raw(env: dict[str, Any], hosts: tuple[str, str] = ("vm1", "vm1"), busbw: float = 200.0):
    """A two-rank worker answer as rank 0 prints it: ranks, environment, the sweep."""
    points = [
        {"size_bytes": s, "count": s // 4, "time_us": 1.0, "algbw_gbps": busbw,
         "busbw_gbps": busbw, "correct": True, "iters": 20}
        for s in (1 << 28, 1 << 29, 1 << 30)
    ]  # fmt: skip
    return {
        "backend": "nccl",
        "device": "cuda",
        "world_size": 2,
        "ranks": [
            {"rank": i, "host": h, "local_rank": i, "bus_id": b}
            for i, (h, b) in enumerate(zip(hosts, BUS, strict=True))
        ],
        "environment": {**env, "gpu": "NVIDIA A100 80GB PCIe"},
        "allreduce": {"points": points, "iters": 20, "warmup": 5},
    }


def test_a_bridged_a100_pair_is_judged_against_the_bridge_not_the_nic(node_with) -> None:
    env = node_with("nvidia-smi-nvlink-pair")
    assert env["gpu_index_by_bus_id"] == {BUS[0]: 0, BUS[1]: 1}
    cert = Certification(allreduce_busbw_fraction_min=0.7)
    ar = allreduce_result(_raw(env, busbw=200.0), NCCL, cert, nic_gbps=100.0)
    assert ar.link == "nvlink" and ar.link_detail == "GPU0-GPU1 NV12"
    assert ar.line_rate_gbps == 2400 and "A100" in (ar.link_source or "")
    assert ar.sys_crossing == []
    # 200 GB/s is 16x a 100 GbE port, but 0.67 of the bridge's 300 GB/s each way: a fail.
    check = verdict.allreduce_busbw(ar, cert, judge_link=True)
    assert check.status.value == "fail", check
    assert "over nvlink (GPU0-GPU1 NV12)" in check.observed and "datasheet" in check.expected
    passing = allreduce_result(_raw(env, busbw=230.0), NCCL, cert, nic_gbps=100.0)
    assert verdict.allreduce_busbw(passing, cert, judge_link=True).status.value == "pass"


def test_gpus_across_sockets_say_so_and_are_judged_only_against_a_stated_figure(node_with):
    env = node_with("nvidia-smi-pcie-pair")
    cert = Certification()
    ar = allreduce_result(_raw(env, busbw=20.0), NCCL, cert, nic_gbps=100.0)
    assert ar.link == "sys" and ar.sys_crossing == ["GPU0-GPU1 SYS"]
    check = verdict.allreduce_busbw(ar, cert, judge_link=True)
    assert check.status.value == "skip" and "through SYS" in check.reason
    assert "across sockets: GPU0-GPU1 SYS" in check.observed
    stated = Certification(
        links=[{"topology": "sys", "busbw_gbps": 18.0, "source": "measured on a healthy R750xa"}]
    )
    ar = allreduce_result(_raw(env, busbw=20.0), NCCL, stated, nic_gbps=100.0)
    check = verdict.allreduce_busbw(ar, stated, judge_link=True)
    assert check.status.value == "pass" and ar.expected_busbw_gbps == 18.0
    assert check.expected == ">= 18 GB/s (measured on a healthy R750xa)"
    assert "20 GB/s busbw over sys" in check.observed and "across sockets" in check.observed


def test_a_launch_across_nodes_is_judged_against_the_nic(node_with) -> None:
    env = node_with("nvidia-smi-nvlink-pair")
    cert = Certification(allreduce_busbw_fraction_min=0.7)
    ar = allreduce_result(_raw(env, ("node1", "node2"), busbw=11.0), NCCL, cert, nic_gbps=100.0)
    assert ar.link == "nic" and ar.line_rate_gbps == 100.0
    assert ar.link_source == links.NIC_SOURCE
    # Both GPUs of the fake reach its NICs only through SYS: no GPUDirect RDMA path.
    assert ar.sys_crossing == ["GPU0-NICs SYS"]
    assert ar.busbw_fraction == pytest.approx(0.88)
    override = Certification(line_rate_gbps=200.0)
    ar = allreduce_result(_raw(env, ("node1", "node2"), busbw=11.0), NCCL, override, 100.0)
    assert ar.line_rate_gbps == 200.0 and ar.link_source == "certification.line_rate_gbps"


def test_the_specs_own_figure_wins_and_must_name_its_source(node_with) -> None:
    env = node_with("nvidia-smi-nvlink-pair")
    own = Certification(
        links=[
            {"topology": "nvlink", "gpu": "H100", "busbw_gbps": 400, "source": "not these GPUs"},
            {"topology": "nvlink", "gpu": "A100", "busbw_gbps": 230, "source": "vendor run"},
        ]
    )
    ar = allreduce_result(_raw(env, busbw=229.0), NCCL, own, nic_gbps=100.0)
    assert ar.expected_busbw_gbps == 230 and ar.link_source == "vendor run"
    assert verdict.allreduce_busbw(ar, own, judge_link=True).status.value == "fail"
    with pytest.raises(ValidationError, match="source"):
        Certification(links=[{"topology": "nvlink", "busbw_gbps": 230}])
    with pytest.raises(ValidationError, match="exactly one"):
        Certification(
            links=[{"topology": "nic", "busbw_gbps": 11, "line_rate_gbps": 100, "source": "x"}]
        )
    with pytest.raises(ValidationError):
        Certification(links=[{"topology": "infiniband", "busbw_gbps": 1, "source": "x"}])


def test_a_gpu_ranks_answer_is_recorded_with_its_bus_ids(node_with) -> None:
    """A GPU worker's ranks carry their bus id; the launch record takes them (an H200 run
    lost its bench.json over that field once)."""
    raw = _raw(node_with("nvidia-smi-nvlink-pair"))
    entry = launch_entry(here("1 node(s), 2 GPU(s): allreduce", [["x"]]), ["allreduce"],
                         Path("launch.log"), raw)  # fmt: skip
    record = BenchLaunch.model_validate(entry)
    assert [r.bus_id for r in record.ranks or []] == BUS
