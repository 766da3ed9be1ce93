"""What a run directory holds cannot hang, exhaust or crash the report and serve (issue
"Hardening, second round", items 2, 4, 8 and 10).

Each test plants what a hostile node or a copied run could hold: one very long value, a
sparse 1 GB MANIFEST or spec.yaml (no disk used), a big tree for serve's manifest column,
a 700-level nested record, a NUL in a URL. Figures (how long, how much memory) are in
benchmarks/hostile_inputs.py; these tests assert the behaviour.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading

import pytest

from rackcert import serve
from rackcert.core.errors import RackcertError
from rackcert.report.build import build_report
from rackcert.report.manifest import verify
from tests.support.plugins.report import write_run


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rackcert.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", **env},
        timeout=300,
    )


def test_a_deeply_nested_record_is_one_line(tmp_path):
    run = write_run(tmp_path / "runs")
    deep: object = "x"
    for _ in range(700):
        deep = {"a": deep}
    record = json.loads((run.path / "validate.json").read_text())
    record["data"]["summary"] = deep
    (run.path / "validate.json").write_text(json.dumps(record))
    done = _cli("report", str(run.path), "--format", "json")
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    assert "nested deeper than 64 levels" in done.stdout + done.stderr


def test_serve_answers_400_to_a_nul_in_the_url(tmp_path):
    write_run(tmp_path / "runs", stages=("plan",))
    server = serve.make_server(tmp_path / "runs", "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        for path in ("/runs/r750xa-4node/%00/x", "/runs/a%00b/c/d"):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})
            assert conn.getresponse().status == 400
            conn.close()
    finally:
        server.shutdown()
        server.server_close()


def test_a_pdf_that_overruns_is_stopped_and_the_rest_is_written(tmp_path, monkeypatch):
    run = write_run(tmp_path / "runs")
    monkeypatch.setenv("RACKCERT_PDF_TIMEOUT", "0.05")  # not even the interpreter starts
    with pytest.raises(RackcertError, match="report.pdf not written: rendering ran past"):
        build_report(run)
    assert not (run.path / "report.pdf").exists()
    assert (run.path / "report.html").is_file() and (run.path / "run.json").is_file()
    record = json.loads((run.path / "report.json").read_text())
    assert record["status"] == "partial" and "report.pdf not written" in record["error"]
    assert "report.pdf" not in record["data"]["files"]
    assert verify(run.path).ok  # the manifest was written, over everything
