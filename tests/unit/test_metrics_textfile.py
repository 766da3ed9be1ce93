"""Prometheus textfiles from validate, the health check and bench: the format, hostile node
strings, drift from the certified run, and atomic writes. promtool (Debian's prometheus
package) lints every file rackcert writes here."""

from __future__ import annotations

import json
from pathlib import Path

from rackcert.core.results import CheckResult, Severity, Status
from rackcert.core.runs import RunDir
from rackcert.core.stage_records import ValidateData, ValidateNode
from rackcert.metrics.bench_figures import BenchFigure
from rackcert.metrics.certified_drift import figure_drift
from rackcert.metrics.families import (
    exposition,
    validate_families,
)
from tests.support.metrics_textfile import samples
from tests.support.metrics_textfile import validate_record as _record


def test_skipped_checks_are_left_out_and_severity_is_a_label() -> None:
    results = [
        CheckResult(id="gpu.nvlink.active", node="n1", status=Status.skipped),
        CheckResult(id="time.sync", node="n1", status=Status.failed, severity=Severity.warning),
        CheckResult(id="gpu.driver", node="n1", status=Status.error),
    ]
    got = {
        s[1]["check"]: (s[1]["severity"], s[2])
        for s in samples(exposition(validate_families(_record(results, {}), "lab")))
        if s[0] == "rackcert_check_failed"
    }
    assert got == {"time.sync": ("warning", 1.0), "gpu.driver": ("error", 1.0)}


def test_figure_drift_beyond_tolerance_only_and_in_the_right_direction() -> None:
    before = [
        BenchFigure("storage_read_bytes_per_second", 1000.0, node="n1"),
        BenchFigure("storage_read_bytes_per_second", 1000.0, node="n2"),
        BenchFigure("storage_read_bytes_per_second", 1000.0, node="n3"),
    ]
    after = [
        BenchFigure("storage_read_bytes_per_second", 970.0, node="n1"),  # -3%: noise
        BenchFigure("storage_read_bytes_per_second", 800.0, node="n2"),  # -20%: worse
        BenchFigure("storage_read_bytes_per_second", 1300.0, node="n3"),  # +30%: better
    ]
    items = {i.node: i for i in figure_drift(before, after)}
    assert set(items) == {"n2", "n3"}
    assert items["n2"].worse and not items["n3"].worse
    assert items["n2"].before == "1000" and items["n2"].after == "800"


def test_a_drift_line_shows_hostile_values_and_cuts_them() -> None:
    from rackcert.metrics.certified_drift import LINE_CAP, DriftItem

    line = DriftItem("n\x1b]52;c;AAAA\x07" + "x" * 5000, "version", "os", "a\nb", "", True).line()
    assert "\x1b" not in line and "\n" not in line and "\x07" not in line
    assert "\\x1b]52" in line and "a\\nb -> - (worse)" in line
    assert len(line) < 2 * LINE_CAP + 100


def _run_with_facts(root: Path, facts: dict) -> RunDir:
    run = RunDir.create(root, "lab", "a" * 64, "spec")
    (run.path / "facts.json").write_text(json.dumps({"nodes": {"n1": facts}}))
    data = ValidateData(nodes={"n1": ValidateNode(reachable=True)}, facts="facts.json")
    run.write_stage("validate", data)
    return run


def test_firmware_vbios_and_link_drift_from_facts(tmp_path: Path) -> None:
    from rackcert.metrics.certified_drift import validate_drift

    def facts(nic_fw: str, width: str, gen_now: str, gen_max: str) -> dict:
        gpu = {"index": "0", "pci.bus_id": "00000000:17:00.0", "name": "NVIDIA A100 80GB PCIe",
               "vbios_version": "92.00.68.00.01", "pcie.link.width.current": width,
               "pcie.link.gen.current": gen_now, "pcie.link.gen.max": gen_max}  # fmt: skip
        nic = {"version": nic_fw, "devices": {"ens1f0": {"firmware": nic_fw, "source": "ethtool"}}}
        return {"gpus": [gpu], "nic_firmware": nic}

    before = _run_with_facts(tmp_path, facts("22.31.1014", "16", "4", "4"))
    # An idle GPU at gen 1 is power management, not drift; the firmware and width are.
    after = _run_with_facts(tmp_path, facts("22.36.1010", "8", "1", "4"))
    items = {(i.kind, i.item): i for i in validate_drift(before, after)}
    assert set(items) == {("firmware", "nic_firmware"), ("gpu", "00000000:17:00.0 pcie_width")}
    fw = items[("firmware", "nic_firmware")]
    assert (fw.before, fw.after, fw.worse) == ("22.31.1014", "22.36.1010", False)
    assert items[("gpu", "00000000:17:00.0 pcie_width")].worse
    # The generation the link allows went down (a slot retrained to gen 3): worse.
    slower = _run_with_facts(tmp_path, facts("22.31.1014", "16", "3", "3"))
    gen = [i for i in validate_drift(before, slower) if i.item.endswith("pcie_gen_max")]
    assert [(g.before, g.after, g.worse) for g in gen] == [("4", "3", True)]
    assert validate_drift(before, before) == []  # nothing changed: nothing reported
