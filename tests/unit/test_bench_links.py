"""Thresholds that know the link: each allreduce launch is judged against what it crossed.

The node's topology comes from the worker's own probe (validation.bench.node.environment) run
against the fake nvidia-smi of a VM with two bridged A100s (NV12) and of one with two
unbridged A100s (SYS): the same stand-ins the discovery tests use (tests/support/fakes/, a GPU
cannot exist here). The bus ids are the fakes' guest addresses.
"""

from __future__ import annotations

from rackcert.core.spec import Certification
from validation.bench import links


def test_cpu_ranks_and_one_rank_are_not_judged() -> None:
    raw = {"device": "cpu", "ranks": [{"host": "a"}, {"host": "a"}], "environment": {}}
    assert links.launch_link(raw).topology == "loopback"
    assert links.expectation(links.launch_link(raw), Certification(), 100.0) is None
    assert links.launch_link({"ranks": [{"host": "a"}]}).topology is None


def test_shipped_figures_each_cite_where_they_come_from() -> None:
    assert {e.topology for e in links.SHIPPED} == {"nvlink", "pcie"}
    for e in links.SHIPPED:
        assert e.line_rate_gbps and ("datasheet" in e.source or "PCI Express" in e.source)
    a100 = links.LaunchLink("nvlink", gpu="NVIDIA A100 80GB PCIe")
    assert links.expectation(a100, Certification(), None).line_rate_gbps == 2400
    h100_pcie = links.LaunchLink("nvlink", gpu="NVIDIA H100 PCIe")
    assert links.expectation(h100_pcie, Certification(), None).line_rate_gbps == 2400
    h200 = links.LaunchLink("nvlink", gpu="NVIDIA H200")
    assert links.expectation(h200, Certification(), None).line_rate_gbps == 3600
