"""The PDF report renders (pdftoppm turns page 1 into a PNG) and carries the same content."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from rackcert.cli import main


def test_pdf_page_renders_to_png(built_pair, tmp_path):
    _root, run_a, _ = built_pair
    pdf = run_a.path / "report.pdf"
    assert pdf.read_bytes()[:5] == b"%PDF-"
    assert shutil.which("pdftoppm"), "pdftoppm missing: .ci/setup.d/50-report.sh installs it"
    subprocess.run(
        ["pdftoppm", "-f", "1", "-l", "1", "-r", "60", "-png", str(pdf), str(tmp_path / "page")],
        check=True,
        timeout=60,
    )
    png = next(tmp_path.glob("page*.png"))
    from PIL import Image

    with Image.open(png) as im:
        assert im.size[0] > 400 and im.size[1] > 600  # an A4 page at 60 dpi
        colours = im.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 20  # text and the verdict banner, not blank
    # the green PASS banner is on page 1
    assert any(g > 100 and r < 80 and b < 80 for _n, (r, g, b) in colours)


def test_pdf_text_has_verdict_matrix_checks_and_figures(built_pair):
    _root, run_a, _ = built_pair
    out = subprocess.run(
        ["pdftotext", "-layout", str(run_a.path / "report.pdf"), "-"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    for text in (
        "PASS",
        "Certified matrix",
        "not NVIDIA's list",
        "Checks by node",
        "ResNet50 weak scaling",
        "10,675.09",
        "Allreduce bus bandwidth",
        "weak-scaling speedup vs linear",
        "Run metadata",
    ):
        assert text in out, text
    pages = subprocess.run(
        ["pdfinfo", str(run_a.path / "report.pdf")], check=True, capture_output=True, text=True
    ).stdout
    assert int(next(ln.split()[-1] for ln in pages.splitlines() if ln.startswith("Pages:"))) >= 3


def test_cli_report_writes_the_files_and_the_stage_record(report_runs, capsys):
    run = report_runs()
    assert main(["report", str(run.path), "--format", "json,html", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "PASS" and len(out["manifest_sha256"]) == 64
    assert sorted(p.rsplit("/", 1)[1] for p in out["files"]) == ["report.html", "run.json"]
    record = json.loads((run.path / "report.json").read_text())
    assert record["stage"] == "report" and record["data"]["verdict"] == "PASS"
    assert record["data"]["files"] == ["run.json", "report.html", "report.json", "MANIFEST.sha256"]
    from rackcert.core.runs import list_runs

    assert [r.verdict for r in list_runs(run.path.parents[1])] == ["PASS"]


def test_cli_report_accepts_a_rack_name_for_its_latest_run(report_runs, capsys):
    report_runs()
    newest = report_runs(driver="535.54.03")
    rc = main(["report", "r750xa-4node", "--runs-dir", str(report_runs.root), "--format", "json"])
    assert rc == 0 and (newest.path / "run.json").is_file()
    assert "certified matrix dell-r750xa-a100-esxi703: 8 match, 1 differ" in capsys.readouterr().out


@pytest.mark.parametrize("args", [["nowhere"], ["RUN", "--format", "docx"]])
def test_cli_report_bad_input_is_one_line_exit_2(report_runs, capsys, args):
    run = report_runs()
    args = [str(run.path) if a == "RUN" else a for a in args]
    assert main(["report", *args, "--runs-dir", str(report_runs.root)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error:")
