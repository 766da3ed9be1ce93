"""The certified matrix: the seed's reference entry, version rules, matches/differs/unknown."""

from __future__ import annotations

import pytest

from rackcert.cli import main
from rackcert.core.errors import InputError
from rackcert.report.assemble import assemble
from rackcert.report.matrix import (
    Rule,
    certified_dir,
    compare_versions,
    load_references,
    version_prefix,
)


def test_seed_reference_entry_is_there_with_its_components():
    refs = load_references()
    ref = refs["dell-r750xa-a100-esxi703"]
    rules = {r.component: r for r in ref.components}
    assert {
        "server_model",
        "gpu_model",
        "esxi_version",
        "nvidia_driver",
        "cuda",
        "ofed",
        "nic_model",
        "nic_firmware",
    } <= set(rules)
    assert rules["nvidia_driver"].holds("470.82.01") and not rules["nvidia_driver"].holds("535.1")
    assert ref.reference_results["resnet50_images_per_sec"] == {
        1: 2757.21,
        2: 5391.751667,
        4: 10675.0925,
    }
    assert "not NVIDIA's list" in ref.disclaimer


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        ("470.82.01", "470.82.01", 0),
        ("470.103.01", "470.82.01", 1),
        ("470.57.02", "470.82.01", -1),
        ("5.4-3.1.0.0", "5.4-1.0.3.0", 1),
        ("5.5-1.0.3.2", "5.5", 1),
        ("22.31.1014", "22.40", -1),
        ("7.0.3", "7.0.3", 0),
    ],
)
def test_versions_compare_numerically(a, b, want):
    assert compare_versions(a, b) == want


def test_rules():
    assert version_prefix("11.4.120", "11.4") and not version_prefix("11.40", "11.4")
    assert Rule(component="x", contains_all=["A100", "pcie"]).holds("NVIDIA A100 80GB PCIe")
    assert not Rule(component="x", contains_all=["A100", "PCIe"]).holds("NVIDIA A100-SXM4-80GB")
    r = Rule(component="x", min="5.4-1.0.3.0", below="5.5")
    assert r.holds("5.4-3.1.0.0") and not r.holds("5.5-1.0.3.2") and not r.holds("5.3-1.0.0.1")
    assert r.expected() == ">= 5.4-1.0.3.0, < 5.5"


def test_matches_differs_unknown_per_component(report_runs):
    rec = assemble(report_runs(driver="535.54.03"))
    rows = {r.component: r for r in rec.matrix.rows}
    assert rows["server_model"].status == "matches"
    assert rows["nvidia_driver"].status == "differs"
    assert rows["nvidia_driver"].observed["mn-node3"] == "535.54.03"
    assert rows["nic_firmware"].status == "unknown"  # nothing in this run observed it
    assert rows["bios_version"].status == "unknown"  # discovery does not record the BIOS
    assert rec.matrix.counts == {"matches": 8, "differs": 1, "unknown": 2}


def test_missing_reference_is_a_note_not_a_crash(report_runs, tmp_path, monkeypatch):
    monkeypatch.setenv("RACKCERT_CERTIFIED_DIR", str(tmp_path / "empty"))
    rec = assemble(report_runs())
    assert rec.matrix.rows == [] and "not found" in rec.matrix.note
    assert certified_dir() == tmp_path / "empty"


def test_broken_matrix_file_is_one_line_exit_2(report_runs, tmp_path, capsys):
    run = report_runs()
    bad = tmp_path / "certified"
    bad.mkdir()
    (bad / "x.yaml").write_text("id: x\ncomponents:\n  - component: cuda\n    bogus: 1\n")
    with pytest.raises(InputError, match=r"x.yaml: components.0.bogus"):
        load_references(bad)
    rc = main(["report", str(run.path), "--format", "json", "--matrix-dir", str(bad)])
    err = capsys.readouterr().err
    assert rc == 2 and "x.yaml: components.0.bogus" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_unknown_reference_option_is_refused(report_runs, capsys):
    run = report_runs()
    rc = main(["report", str(run.path), "--reference", "no-such-entry"])
    assert rc == 2 and "no such certified-matrix entry" in capsys.readouterr().err
