"""MANIFEST.sha256 and `rackcert report verify`: any changed, added or removed byte fails."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rackcert.cli import main
from rackcert.report.manifest import MANIFEST_NAME, parse, verify
from tests.support.plugins.report import copy_run


@pytest.fixture
def run(built_pair, tmp_path):
    return copy_run(built_pair[1], tmp_path / "runs")


def test_manifest_covers_every_file_and_is_written_last(run):
    listed = parse((run.path / MANIFEST_NAME).read_text())
    on_disk = {p.relative_to(run.path).as_posix() for p in run.path.rglob("*") if p.is_file()}
    assert set(listed) == on_disk - {MANIFEST_NAME}
    assert {
        "run.json",
        "report.html",
        "report.pdf",
        "report.json",
        "spec.yaml",
        "meta.json",
        "facts.json",
        "artifacts/validate/junit.xml",
    } <= set(listed)
    mtimes = {p.name: p.stat().st_mtime_ns for p in run.path.iterdir() if p.is_file()}
    assert mtimes[MANIFEST_NAME] >= max(mtimes.values())
    assert verify(run.path).ok


def test_sha256sum_accepts_the_manifest(run):
    out = subprocess.run(
        ["sha256sum", "-c", "--quiet", MANIFEST_NAME], cwd=run.path, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_one_byte_change_fails_verify(run, capsys):
    assert main(["report", "verify", str(run.path)]) == 0
    assert "OK" in capsys.readouterr().out
    pdf = run.path / "report.pdf"
    data = bytearray(pdf.read_bytes())
    data[len(data) // 2] ^= 0x01
    pdf.write_bytes(bytes(data))
    assert main(["report", "verify", str(run.path)]) == 1
    captured = capsys.readouterr()
    assert "changed: report.pdf" in captured.out
    assert "1 differences from MANIFEST.sha256 (changed: report.pdf)" in captured.err


def test_added_and_removed_files_fail(run):
    (run.path / "artifacts" / "validate" / "junit.xml").unlink()
    (run.path / ".bench.json.abc.tmp").write_bytes(b"")  # even an empty stray file counts
    result = verify(run.path)
    assert not result.ok
    assert result.removed == ["artifacts/validate/junit.xml"]
    assert result.added == [".bench.json.abc.tmp"]
    assert result.changed == []


def test_changed_manifest_line_fails(run):
    text = (run.path / MANIFEST_NAME).read_text().replace("  plan.json", "  plan2.json")
    (run.path / MANIFEST_NAME).write_text(text)
    result = verify(run.path)
    assert result.added == ["plan.json"] and result.removed == ["plan2.json"]


def test_verify_exit_code_through_the_console_script(run):
    cmd = [sys.executable, "-m", "rackcert.cli", "report", "verify", str(run.path)]
    with (run.path / "spec.yaml").open("ab") as handle:
        handle.write(b"\n")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "changed: spec.yaml" in done.stdout
    assert "Traceback" not in done.stderr
