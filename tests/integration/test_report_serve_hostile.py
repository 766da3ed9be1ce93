"""`rackcert serve` over a runs directory someone else could write: what a planted run cannot do.

One real `rackcert serve` process over a runs root holding a genuine failed run and planted
ones: a spec whose password_file is a FIFO, a spec whose password_file holds the word FAIL,
a report.html and an SVG with scripts, malformed records (meta.json a list, a stage record
a number, a 3,000-deep spec.yaml). Requests are sent with the Host header a DNS-rebinding
page would send.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from urllib.parse import urlsplit

import pytest

from tests.support.plugins.report import write_run
from tests.support.plugins.report_serve_hostile import get as _get


@pytest.mark.parametrize("name", ["localhost", "127.0.0.1", "LOCALHOST"])
def test_loopback_host_with_the_bound_port_is_answered(site, name):
    port = urlsplit(site["base"]).port
    status, _h, _b = _get(site["base"], "/api/runs", f"{name}:{port}")
    assert status == 200


def test_a_planted_spec_neither_hangs_serve_nor_masks_other_runs(site):
    """The FIFO password_file hung the listing; the word FAIL was masked in every run."""
    status, _h, body = _get(site["base"], "/api/runs")
    assert status == 200
    by_run = {r["run"]: r for r in json.loads(body)}
    assert by_run[site["failed"].path.name]["verdict"] == "FAIL"
    status, _h, page = _get(site["base"], "/")
    assert status == 200 and b'data-verdict="FAIL"' in page and b"********" not in page
    report = site["failed"].path.name
    status, _h, html = _get(site["base"], f"/runs/r750xa-4node/{report}/report.html")
    assert status == 200 and b"FAIL" in html


def test_every_page_has_a_strict_content_security_policy(site):
    word = site["word"].path.name
    for path in (
        "/",
        "/api/runs",
        f"/runs/r750xa-4node/{word}/",
        f"/runs/r750xa-4node/{word}/live",
    ):
        status, headers, _b = _get(site["base"], path)
        csp = headers.get("content-security-policy", "")
        assert status == 200, path
        assert "default-src 'none'" in csp and "sandbox" in csp and "script-src" not in csp
    status, headers, body = _get(site["base"], f"/runs/r750xa-4node/{word}/report.html")
    assert status == 200 and b"<script>" in body  # served as it is, but nothing in it runs
    assert "default-src 'none'" in headers["content-security-policy"]


@pytest.mark.parametrize(
    ("name", "ctype", "attachment"),
    [
        ("evil.html", "application/octet-stream", True),
        ("plot.svg", "application/octet-stream", True),
        ("x.xml", "text/plain", False),
    ],
)
def test_foreign_html_is_never_served_as_a_page(site, name, ctype, attachment):
    word = site["word"].path.name
    status, headers, _b = _get(site["base"], f"/runs/r750xa-4node/{word}/artifacts/{name}")
    assert status == 200
    assert headers["content-type"].split(";")[0] == ctype
    assert ("attachment" in headers.get("content-disposition", "")) is attachment


def test_malformed_runs_are_shown_unreadable_and_the_rest_list(site):
    status, _h, body = _get(site["base"], "/api/runs")
    assert status == 200
    by_run = {r["run"]: r for r in json.loads(body)}
    assert len(by_run) == 6
    for bad in site["bad"]:
        assert by_run[bad.path.name]["verdict"] == "unreadable"
    assert by_run[site["failed"].path.name]["verdict"] == "FAIL"
    status, _h, page = _get(site["base"], "/")
    assert status == 200 and page.count(b'<tr class="run"') == 6
    deep = site["deep"].path.name
    status, _h, body = _get(site["base"], f"/runs/r750xa-4node/{deep}/live")
    assert status in (200, 422) and b"Traceback" not in body
    bad = site["bad"][1].path.name
    status, _h, body = _get(site["base"], f"/runs/r750xa-4node/{bad}/live")
    assert status in (200, 422) and b"Traceback" not in body


def test_runs_list_shows_a_malformed_run_and_lists_the_rest(site):
    env = {**os.environ, "COLUMNS": "250"}
    cli = [sys.executable, "-m", "rackcert.cli", "runs", "list", "--runs-dir", str(site["root"])]
    done = subprocess.run(cli, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "internal error" not in done.stdout + done.stderr
    assert done.stdout.count("unreadable") >= 2 and "FAIL" in done.stdout
    done = subprocess.run([*cli, "--json"], capture_output=True, text=True, env=env, timeout=120)
    listed = json.loads(done.stdout)
    assert len(listed) == 6 and sum(1 for r in listed if r["problem"]) == 2


def test_large_files_are_streamed_and_cut(tmp_path, monkeypatch):
    """A 3 MiB log with a 1 MiB cap: the first MiB and a note, never the file whole in memory."""
    from rackcert import serve

    monkeypatch.setattr(serve, "MAX_SERVED", 1 << 20)
    run = write_run(tmp_path / "runs", stages=("plan",))
    (run.path / "big.log").write_bytes(b"x" * (3 << 20))
    (run.path / "big.bin").write_bytes(b"\0" * (3 << 20))
    server = serve.make_server(tmp_path / "runs", "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        status, headers, body = _get(base, f"/runs/r750xa-4node/{run.path.name}/big.log")
        assert status == 200 and headers["content-type"].startswith("text/plain")
        assert body.startswith(b"x" * (1 << 20)) and b"cut at 1048576 of 3145728" in body
        assert len(body) < (1 << 20) + 200
        status, _h, _b = _get(base, f"/runs/r750xa-4node/{run.path.name}/big.bin")
        assert status == 413
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("host", ["attacker.example:{port}", "attacker.example", "127.0.0.1:1"])
def test_foreign_host_header_is_refused(site, host):
    """DNS rebinding: a page on attacker.example resolving to 127.0.0.1 reads /api/runs."""
    port = urlsplit(site["base"]).port
    status, _h, body = _get(site["base"], "/api/runs", host.format(port=port))
    assert status == 421 and b"mn-node" not in body and b"rack" not in body
