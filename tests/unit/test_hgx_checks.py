"""Validate's HGX checks on the fake nvidia-smi of a vGPU VM on an HGX H200 partition.

The fake (tests/support/fakes/nvidia-smi-hgx-partition) prints NVIDIA's documented layouts; each
case
breaks one thing through its knobs and the one check that judges it must fail with its reason.
Expectations come from inventories/hgx-h200-4node.yaml through validation.expect.
"""

from __future__ import annotations

from rackcert.core.paths import inventories_dir
from rackcert.core.results import Status
from rackcert.core.spec_loader import load_spec
from tests.support.hgx_checks import HGX_CHECKS
from tests.support.hgx_checks import expect as _expect
from tests.support.paths import FIXTURES
from validation.checks import REGISTRY, NodeView, load_all, run_check
from validation.expect import expectations
from validation.probes import ProbeOutput

H200 = FIXTURES / "h200"


def test_the_real_h200_capture_parses_and_a_pcie_rack_skips_these_checks():
    """The captured bare-metal H200's -q (module 1, fabric N/A) and an r750xa VM's expectations."""
    load_all()
    r750 = expectations(load_spec(inventories_dir() / "r750xa-4node.yaml").spec)["s1-pair"]
    outputs = {
        "nvidia_smi": ProbeOutput("nvidia_smi", 0, (H200 / "nvidia-smi-q.txt").read_text()),
        "nvlink": ProbeOutput("nvlink", 0, ""),
        "gpu_topology": ProbeOutput(
            "gpu_topology", 0, (H200 / "nvidia-smi-topo-m.txt").read_text()
        ),
    }
    for check_id in HGX_CHECKS:
        res = run_check(REGISTRY[check_id], NodeView(r750, outputs))
        assert res.status is Status.skipped, (check_id, res)
    hgx_one = _expect("pair-f").model_copy(update={"gpus": 1, "partition": 13})
    fabric = run_check(REGISTRY["gpu.fabric"], NodeView(hgx_one, outputs))
    assert fabric.status is Status.skipped  # the capture's Fabric State is N/A
