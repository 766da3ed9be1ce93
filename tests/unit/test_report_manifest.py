"""MANIFEST.sha256 and `rackcert report verify`: any changed, added or removed byte fails."""

from __future__ import annotations

from rackcert.cli import main
from rackcert.report.manifest import MANIFEST_NAME, file_digests, parse, render


def test_no_manifest_and_garbage_manifest_are_one_line_errors(report_runs, capsys):
    fresh = report_runs()
    assert main(["report", "verify", str(fresh.path)]) == 1
    assert "no MANIFEST.sha256; run `rackcert report" in capsys.readouterr().err
    (fresh.path / MANIFEST_NAME).write_text("not a manifest\n")
    assert main(["report", "verify", str(fresh.path)]) == 1
    assert (
        "MANIFEST.sha256:1: not a sha256sum line (digest, two spaces, path)"
        in capsys.readouterr().err
    )


def test_odd_file_names_round_trip(tmp_path):
    (tmp_path / "a b").write_text("1")
    (tmp_path / "back\\slash").write_text("2")
    (tmp_path / "new\nline").write_text("3")
    digests = file_digests(tmp_path)
    assert parse(render(digests).decode()) == digests
