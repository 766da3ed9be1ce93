"""A vCenter that answers HTTP 500, and plain http off the loopback: one line, exit 2.

The 500 comes from a real HTTP server on the loopback that answers every request with
500, as the reverse proxy in front of a vCenter does while its services are down
(any service on the spec's port that is not vCenter behaves the same for pyVmomi).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rackcert.core.paths import REPO_ROOT
from tests.support.vsphere_session_faults import spec_at as _spec


class _Answers500(BaseHTTPRequestHandler):
    def _fail(self) -> None:
        body = b"<html><body>500 Internal Server Error</body></html>"
        self.send_response(500)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _fail  # noqa: N815 - stdlib naming

    def log_message(self, *args) -> None:
        pass


def _plan(tmp_path, spec: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "plan", spec, "--runs-dir", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "COLUMNS": "200"},
        timeout=120,
    )


def test_http_500_is_one_session_error_line(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answers500)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        done = _plan(tmp_path, _spec(tmp_path, "127.0.0.1", server.server_address[1]))
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "did not answer as a vCenter" in lines[0] and "internal error" not in lines[0]


@pytest.mark.parametrize("host", ["10.20.30.40", "vcenter.example.internal", "::ffff:10.0.0.1"])
def test_plain_http_off_the_loopback_is_refused(tmp_path, host):
    done = subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "spec", "check", _spec(tmp_path, host, 80)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "would send the vCenter password in clear" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
