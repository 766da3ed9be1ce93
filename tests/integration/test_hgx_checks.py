"""Validate's HGX checks on the fake nvidia-smi of a vGPU VM on an HGX H200 partition.

The fake (tests/support/fakes/nvidia-smi-hgx-partition) prints NVIDIA's documented layouts; each
case
breaks one thing through its knobs and the one check that judges it must fail with its reason.
Expectations come from inventories/hgx-h200-4node.yaml through validation.expect.
"""

from __future__ import annotations

import pytest

from rackcert.core.results import Status
from tests.support.hgx_checks import HGX_CHECKS
from tests.support.hgx_checks import expect as _expect
from tests.support.hgx_checks import probe_outputs as _outputs
from validation.checks import REGISTRY, NodeView, load_all, run_check


def _judge(check_id: str, vm: str = "pair-f", **knobs: str):
    load_all()
    return run_check(REGISTRY[check_id], NodeView(_expect(vm), _outputs(**knobs)))


@pytest.mark.parametrize("check_id", HGX_CHECKS)
def test_a_healthy_partition_vm_passes(check_id):
    res = _judge(check_id)
    assert res.status is Status.passed, res


def test_the_eight_gpu_vm_is_judged_across_its_whole_partition():
    knobs = {"FAKE_GPUS": "8", "FAKE_MODULES": "1 2 3 4 5 6 7 8"}
    links = _judge("gpu.nvlink.links", "train8-a", **knobs)
    assert links.status is Status.passed and links.expected == "8 GPU(s) x 18 links at 26.562 GB/s"
    topo = _judge("gpu.topo.partition", "train8-a", **knobs)
    assert topo.status is Status.passed and topo.observed.count("NV18") == 28  # 8 choose 2


@pytest.mark.parametrize(
    ("check_id", "knobs", "reason"),
    [
        ("gpu.nvlink.links", {"FAKE_LINK_DOWN": "1 7"}, "GPU1 17/18 up"),
        ("gpu.topo.partition", {"FAKE_TOPO_PIX": "0 1"}, "not over NVLink: GPU0-GPU1 PIX"),
        (
            "gpu.vgpu.license",
            {"FAKE_LICENSE": "Unlicensed (Restricted)"},
            "unlicensed vGPU: 00000000:13:00.0: Unlicensed (Restricted)",
        ),
        (
            "gpu.fabric",
            {"FAKE_FABRIC": "In_Progress N/A"},
            "fabric not trained: 00000000:13:00.0: In_Progress/N/A",
        ),
        ("gpu.nvlink.links", {"FAKE_GPUS": "1"}, "1 GPU(s) in nvidia-smi nvlink -s"),
    ],
)
def test_each_fault_fails_its_check(check_id, knobs, reason):
    res = _judge(check_id, **knobs)
    assert res.status is Status.failed, res
    assert reason in res.reason


def test_a_guest_that_does_not_report_the_fabric_is_not_failed_for_it():
    res = _judge("gpu.fabric", FAKE_FABRIC="N/A N/A")
    assert res.status is Status.skipped and "does not report the fabric" in res.reason
