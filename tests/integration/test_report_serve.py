"""`rackcert serve` over HTTP: the list, the files, the live view, and what it refuses."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from rackcert.report.build import build_report
from tests.support.plugins.report import start_serve, stop, write_run


def _get(url: str, method: str = "GET") -> tuple[int, str, bytes]:
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve") / "runs"
    passed = write_run(root)
    build_report(passed, formats=("json", "html"))
    partial = write_run(root, stages=("plan", "validate"))
    proc, base = start_serve(root)
    yield base, passed, partial
    stop(proc)


def test_binds_loopback_and_lists_runs_with_verdicts(served):
    base, passed, partial = served
    assert base.startswith("http://127.0.0.1:")
    status, ctype, body = _get(base)
    html = body.decode()
    assert status == 200 and ctype.startswith("text/html")
    assert html.count('<tr class="run"') == 2
    assert 'data-verdict="PASS"' in html and 'data-verdict="no report"' in html
    assert html.index(partial.path.name) < html.index(passed.path.name)  # newest first
    runs = json.loads(_get(base + "api/runs")[2])
    by_run = {r["run"]: r for r in runs}
    assert by_run[passed.path.name]["verdict"] == "PASS"
    assert by_run[passed.path.name]["manifest"] == "intact"
    assert by_run[partial.path.name]["manifest"] == "none"
    assert by_run[partial.path.name]["report"].endswith("/live")


def test_report_files_and_live_view(served):
    base, passed, partial = served
    runs = {r["run"]: r for r in json.loads(_get(base + "api/runs")[2])}
    status, ctype, body = _get(base + runs[passed.path.name]["report"].lstrip("/"))
    assert status == 200 and ctype.startswith("text/html") and b'data-verdict="PASS"' in body
    assert body == (passed.path / "report.html").read_bytes()
    status, ctype, body = _get(base + runs[passed.path.name]["links"]["run.json"].lstrip("/"))
    assert status == 200 and json.loads(body)["verdict"]["verdict"] == "PASS"
    status, _ctype, body = _get(base + runs[partial.path.name]["report"].lstrip("/"))
    assert status == 200 and b'data-verdict="INCOMPLETE"' in body
    assert not (partial.path / "report.html").exists()  # browsing writes nothing
    status, _c, body = _get(base + runs[passed.path.name]["files"].lstrip("/"))
    assert status == 200 and b"artifacts/validate/junit.xml" in body
    assert _get(base, method="HEAD")[0] == 200


@pytest.mark.parametrize(
    "path",
    [
        "runs/../../etc/passwd",
        "runs/r750xa-4node/..%2f..%2f/meta.json",
        "runs/x/y/meta.json",
        "runs/r750xa-4node",
        "etc/passwd",
        "runs/%2e%2e/%2e%2e/etc/passwd",
    ],
)
def test_nothing_outside_run_directories_is_served(served, path):
    base, passed, _ = served
    status, _ctype, body = _get(base + path)
    assert status == 404 and b"root:" not in body


def test_a_post_is_refused(served):
    base, _passed, _ = served
    assert _get(base, method="POST")[0] == 501
