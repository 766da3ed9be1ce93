"""A node whose CPUs are the controller's machine's is judged by its share of that machine
(issue 52, item 3). The lab's nodes are namespaces on one 2-core machine under a load of
~20: one roll failed node 2 on `cpu.memcpy_gb_s 0.768697 below 0.7 x its before 1.1119`
while node 1's own copy rate swung 0.64 -> 1.06 GB/s in the same run. The roll now reads
the same probe on the controller at the same barrier (validation.bench.localisation
.reference); where both report one boot_id the judge compares figure / reference. The rows
below are the probe's own shape (validation/bench/node/probe.py's last line).
"""

from __future__ import annotations

from typing import Any

import pytest

from rackcert.upgrade.evidence import machine, node_figures, reference_figures
from rackcert.upgrade.judge import judge, set_aside
from rackcert.upgrade.ports import Certificate

pytestmark = pytest.mark.unit

LAB = "5f0c3a9e-1d2b-4c6e-9a7f-2b8d4e6f0a11"  # one kernel: the controller's and its namespaces'
RACK_NODE = "0b6f1e2d-3c4a-4b5e-8f70-9a1b2c3d4e5f"  # another machine's kernel


def _row(node: str, boot_id: str | None, gemm: float, copy: float, busbw: float) -> dict[str, Any]:
    unit = {"unit": "cpu", "pci": None, "gemm_gflops": gemm, "memcpy_gb_s": copy, "cpu_id": 0}
    if boot_id is not None:
        unit["machine"] = boot_id
    return {
        "node": node,
        "error": None,
        "device": "cpu",
        "units": [unit],
        "allreduce": {"ranks": 2, "busbw_gb_s": busbw},
    }


def _cert(row: dict[str, Any], reference: dict[str, Any]) -> Certificate:
    """What ValidateCertifier.certify records: the row's figures and the kept reference."""
    return Certificate(
        versions={"nvidia_driver": "535.154.05"},
        checks={"os.kernel": "pass"},
        figures=node_figures(row),
        reference=reference_figures(row, reference),
    )


def _judge(before: Certificate, after: Certificate) -> list[str]:
    return judge(before, after, wanted={"nvidia_driver": "535"}, medians={}, median_fraction=0.7)


def _before(node_boot: str, ref_boot: str) -> Certificate:
    return _cert(
        _row("lab-node2", node_boot, 101.0, 1.1119, 0.150),
        _row("reference", ref_boot, 98.0, 1.10, 0.160),
    )


def test_the_reports_readings_pass_when_the_machines_reference_fell_in_proportion():
    """Before 1.1119 GB/s, after 0.768697 (0.69x): the machine read 1.10 then 0.75 beside it
    at the same barriers (0.68x), so the node's share held (1.01 -> 1.02)."""
    before = _before(LAB, LAB)
    after = _cert(
        _row("lab-node2", LAB, 70.0, 0.768697, 0.100),
        _row("reference", LAB, 68.0, 0.75, 0.105),
    )
    assert set(before.reference) == set(after.reference) == set(before.figures)
    assert _judge(before, after) == []


def test_the_same_readings_on_a_racks_node_fail_as_before():
    """Distinct boot_ids (the controller is not the node's machine): no reference is kept,
    the figure itself is judged, and the copy rate at 0.69x its before fails."""
    before = _before(RACK_NODE, LAB)
    after = _cert(
        _row("lab-node2", RACK_NODE, 101.0, 0.768697, 0.150),
        _row("reference", LAB, 68.0, 0.75, 0.105),
    )
    assert before.reference == after.reference == {}
    assert _judge(before, after) == ["cpu.memcpy_gb_s 0.768697 below 0.7 x its before 1.1119"]


def test_on_a_shared_machine_every_figure_is_set_aside_from_its_before():
    """The lab's figures are its one machine's: seen under the suite's load, a node's GEMM
    share of the reference at the same barrier fell 1.09 -> 0.696 with nothing wrong with
    it, its copy rate 0.64 <-> 1.06, its allreduce's share 0.66-1.80. On a shared machine
    none is compared with its before (each is named by set_aside, still required after)."""
    before = _before(LAB, LAB)
    after = _cert(
        _row("lab-node2", LAB, 60.0, 0.55, 0.070),
        _row("reference", LAB, 97.0, 1.09, 0.158),
    )
    assert _judge(before, after) == []
    assert set_aside(before, after) == sorted(before.figures)


def test_the_same_fall_on_a_racks_node_is_three_findings():
    """Distinct boot_ids: no reference kept, nothing set aside, every figure judged."""
    before = _before(RACK_NODE, LAB)
    after = _cert(
        _row("lab-node2", RACK_NODE, 60.0, 0.55, 0.070),
        _row("reference", LAB, 97.0, 1.09, 0.158),
    )
    assert set_aside(before, after) == []
    assert _judge(before, after) == [
        "cpu.gemm_gflops 60 below 0.7 x its before 101",
        "cpu.memcpy_gb_s 0.55 below 0.7 x its before 1.1119",
        "node_allreduce.busbw_gb_s 0.07 below 0.7 x its before 0.15",
    ]


def test_a_reference_that_failed_after_leaves_the_figure_itself_judged():
    """The controller's probe failed after: no ratio can be formed, so the raw rule holds."""
    before = _before(LAB, LAB)
    failed = {"node": "reference", "error": "exit 1", "units": [], "allreduce": None}
    after = _cert(_row("lab-node2", LAB, 70.0, 0.768697, 0.100), failed)
    assert after.reference == {}
    assert "cpu.memcpy_gb_s 0.768697 below 0.7 x its before 1.1119" in _judge(before, after)


def test_a_figure_not_measured_after_is_a_finding_whatever_the_reference():
    before = _before(LAB, LAB)
    row = _row("lab-node2", LAB, 70.0, 0.768697, 0.100)
    row["allreduce"] = None
    after = _cert(row, _row("reference", LAB, 68.0, 0.75, 0.105))
    assert "node_allreduce.busbw_gb_s" not in after.reference
    assert _judge(before, after) == [
        "node_allreduce.busbw_gb_s not measured after the roll (measured before)"
    ]


def test_gpu_units_and_mixed_rows_carry_no_machine():
    """A GPU unit records no boot_id; units that disagree (or a failed row) name none."""
    gpu = {"node": "n", "error": None, "units": [{"unit": "GPU0", "gemm_gflops": 700.0}]}
    assert machine(gpu) is None
    assert reference_figures(gpu, gpu) == {}
    mixed = _row("n", LAB, 1.0, 1.0, 1.0)
    mixed["units"].append({"unit": "cpu1", "machine": RACK_NODE, "gemm_gflops": 1.0})
    assert machine(mixed) is None
    assert machine({"error": "unreachable", "units": []}) is None
    assert machine(_row("n", LAB, 1.0, 1.0, 1.0)) == LAB


def test_the_reference_is_kept_in_the_record():
    cert = _before(LAB, LAB)
    again = Certificate.from_dict(cert.to_dict())
    assert again.reference == cert.reference and again.reference["cpu.memcpy_gb_s"] == 1.10


def test_the_report_shows_the_share_where_the_judge_compared_shares():
    from rackcert.report.rolling import evidence

    before = _before(LAB, LAB).to_dict()
    after = _cert(
        _row("lab-node2", LAB, 70.0, 0.768697, 0.100), _row("reference", LAB, 68.0, 0.75, 0.105)
    ).to_dict()
    row = next(e for e in evidence(before, after) if e.name == "cpu.memcpy_gb_s")
    assert (row.before, row.after) == (
        "1.1119 (reference 1.1, share 1.01)",
        "0.768697 (reference 0.75, share 1.02)",
    )
    racks = evidence(_before(RACK_NODE, LAB).to_dict(), after)
    assert next(e for e in racks if e.name == "cpu.memcpy_gb_s").before == "1.1119"
