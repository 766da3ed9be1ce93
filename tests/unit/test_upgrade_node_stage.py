"""The roll's certifier runs localisation's per-node stage on the node it certifies.

A real SSH test host (network namespace, sshd) plays the node; the stage is the probe
`rackcert bench --localise` sends (validation.bench.node.probe), and its row becomes the
node's figures, named `<unit>.<metric>` (rackcert.upgrade.evidence.node_figures), which the
roll judges against the node's baseline and the rack's median (rackcert.upgrade.judge).
"""

from __future__ import annotations

from rackcert.core.runs import RunDir
from rackcert.core.stage_records import NodeRow
from rackcert.rollout import ValidateCertifier
from rackcert.upgrade.evidence import node_figures
from rackcert.upgrade.judge import judge
from rackcert.upgrade.ports import Certificate


def test_node_figures_name_each_unit_metric_and_skip_a_failed_row():
    row = {
        "node": "n1",
        "units": [
            {"unit": "GPU0", "pci": "0000:17:00.0", "gemm_gflops": 700e3, "h2d_gb_s": 25.0},
            {"unit": "GPU1", "pci": "0000:31:00.0", "gemm_gflops": 690e3, "d2h_gb_s": 26.0},
        ],
        "allreduce": {"ranks": 2, "busbw_gb_s": 180.0},
    }
    assert node_figures(row) == {
        "GPU0.gemm_gflops": 700e3,
        "GPU0.h2d_gb_s": 25.0,
        "GPU1.gemm_gflops": 690e3,
        "GPU1.d2h_gb_s": 26.0,
        "node_allreduce.busbw_gb_s": 180.0,
    }
    assert node_figures(NodeRow(node="n2", error="ssh: connection refused")) == {}
    # A unit name is the node's word: no control character, no endless name in the record.
    hostile = {"node": "n3", "units": [{"unit": "GPU\x1b[2J" + "x" * 500, "gemm_gflops": 1.0}]}
    (name,) = node_figures(hostile)
    assert "\x1b" not in name and len(name) < 200


def test_a_node_slower_than_the_racks_median_rule_is_a_finding():
    ok = {"node.reachable": "pass"}
    before = Certificate(checks=ok, figures={"cpu.gemm_gflops": 6.0})
    after = Certificate(checks=ok, figures={"cpu.gemm_gflops": 4.5})  # 0.75 x its before
    found = judge(before, after, wanted={}, medians={"cpu.gemm_gflops": 10.0}, median_fraction=0.7)
    assert found == ["cpu.gemm_gflops 4.5 below the rack's median rule (0.7 x median 10)"]
    fine = Certificate(checks=ok, figures={"cpu.gemm_gflops": 9.0})
    assert (
        judge(before, fine, wanted={}, medians={"cpu.gemm_gflops": 10.0}, median_fraction=0.7) == []
    )


def test_a_component_the_roll_leaves_alone_and_nobody_observed_is_not_a_finding():
    """Seen in the lab: the spec pins CUDA and OFED, no check there can observe them (no nvcc,
    no ofed_info), and a roll of the driver alone was refused for them."""
    wanted = {"nvidia_driver": "470.141.03", "cuda": "11.4", "ofed": "5.4-3.1.0.0"}
    ok, fig = {"node.reachable": "pass"}, {"cpu.gemm_gflops": 9.0}
    before = Certificate(
        versions={"nvidia_driver": "470.82.01", "ofed": "5.4-3.1.0.0"}, checks=ok, figures=fig
    )
    after = Certificate(versions={"nvidia_driver": "470.141.03"}, checks=ok, figures=fig)
    kw = {"wanted": wanted, "medians": {}, "median_fraction": 0.7}
    moved = frozenset({"nvidia_driver"})
    # OFED was observed before and is gone now: a finding; CUDA never was: none.
    assert judge(before, after, changing=moved, **kw) == ["ofed not observed, wanted 5.4-3.1.0.0"]
    # The component the roll moves must be observed, whatever the baseline saw.
    unobserved = Certificate(checks=ok, figures=fig)
    assert judge(unobserved, unobserved, changing=moved, **kw)[0] == (
        "nvidia_driver not observed, wanted 470.141.03"
    )
    # Without `changing`, every wanted component counts as moved (and must be observed).
    assert "cuda not observed, wanted 11.4" in judge(before, after, **kw)


def test_the_baseline_takes_the_certified_runs_localised_figures(tmp_path):
    """Before the roll: the certified run's validate (versions, checks) and, where it
    localised, its per-node rows, measured on an idle rack."""
    from rackcert.core.stage_records import BenchData, LocaliseRecord, ValidateData

    certified = RunDir.create(tmp_path / "runs", "rack", "sha256:0", "metadata: {}\n")
    certified.write_stage("validate", ValidateData())
    rows = [
        NodeRow(node="n1", units=[{"unit": "cpu", "gemm_gflops": 9.5, "memcpy_gb_s": 4.0}]),
        NodeRow(node="n2", error="ssh: timed out"),
    ]
    certified.write_stage("bench", BenchData(localise=LocaliseRecord(nodes=rows)))
    # The baseline reads the certified run alone: no spec is needed for it.
    certifier = ValidateCertifier(None, None, certified, certified, tmp_path / "runs")  # type: ignore[arg-type]
    got = certifier.baseline(["n1", "n2", "n3"])
    assert got["n1"].figures == {"cpu.gemm_gflops": 9.5, "cpu.memcpy_gb_s": 4.0}
    assert got["n2"].figures == {} and got["n3"].figures == {}
