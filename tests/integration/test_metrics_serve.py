"""`rackcert serve`'s /metrics: the latest run of each rack, behind serve's Host allow-list.

Runs are written with rackcert's own RunDir (the records validate writes); serve runs in a
thread on a free loopback port; requests go over a real socket with http.client.
"""

from __future__ import annotations

import http.client
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rackcert.core.results import CheckResult, Status
from rackcert.core.runs import RunDir
from rackcert.core.stage_records import (
    BenchData,
    StorageNode,
    StorageResult,
    ValidateData,
    ValidateNode,
)
from rackcert.serve import make_server


def _bench(run: RunDir, mb_s: float) -> None:
    node = StorageNode(path="/data", node="n1", throughput_mb_s=mb_s)
    run.write_stage("bench", BenchData(storage=StorageResult(path="/data", nodes=[node])))


def _validate(run: RunDir, driver: str, status: Status) -> None:
    run.write_stage(
        "validate",
        ValidateData(
            results=[CheckResult(id="gpu.driver", node="n1", status=status, observed=driver)],
            nodes={"n1": ValidateNode(reachable=True, versions={"nvidia_driver": driver})},
        ),
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    root = tmp_path_factory.mktemp("serve-metrics") / "runs"
    certified = RunDir.create(root, "rack-a", "a" * 64, "spec a")
    _validate(certified, "470.82.01", Status.passed)
    _bench(certified, 2000.0)
    certified.write_stage("report", {"verdict": "PASS"})
    upgraded = RunDir.create(root, "rack-a", "a" * 64, "spec a")
    _validate(upgraded, "470.103.01", Status.failed)
    _bench(upgraded, 1500.0)  # -25%: beyond the 5% tolerance, the wrong way
    _validate(RunDir.create(root, "rack-b", "b" * 64, "spec b"), "550.54.15", Status.passed)
    broken = RunDir.create(root, "rack-b", "b" * 64, "spec b")  # newer, and unreadable
    (broken.path / "validate.json").write_text("{not json")
    server = make_server(root, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def _get(port: int, host: str, method: str = "GET") -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(method, "/metrics", headers={"Host": host})
    return conn.getresponse()


def test_metrics_holds_the_latest_run_of_each_rack_with_its_drift(served) -> None:
    _root, port = served
    resp = _get(port, f"127.0.0.1:{port}")
    body = resp.read()
    assert resp.status == 200
    assert resp.getheader("Content-Type") == "text/plain; version=0.0.4; charset=utf-8"
    done = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True,
                          timeout=30, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    got = [
        (s.name, s.labels, s.value)
        for fam in text_string_to_metric_families(body.decode())
        for s in fam.samples
    ]
    failed = {s[1]["spec"]: s[2] for s in got if s[0] == "rackcert_check_failed"}
    assert failed == {"rack-a": 1.0, "rack-b": 0.0}  # rack-a's newest run, not its certified one
    drift = [s[1] for s in got if s[0] == "rackcert_drift" and s[1]["kind"] == "version"]
    assert [(d["spec"], d["before"], d["after"]) for d in drift] == [
        ("rack-a", "470.82.01", "470.103.01")
    ]
    figure = [(s[1], s[2]) for s in got if s[0] == "rackcert_drift" and s[1]["kind"] == "figure"]
    assert figure == [
        (
            {"spec": "rack-a", "node": "n1", "kind": "figure",
             "item": "storage_read_bytes_per_second", "before": "2e+09", "after": "1.5e+09"},
            1.0,
        )
    ]  # fmt: skip
    bench_compared = {s[1]["spec"]: s[2] for s in got if s[0] == "rackcert_bench_drift_compared"}
    assert bench_compared == {"rack-a": 1.0}
    compared = {s[1]["spec"]: s[2] for s in got if s[0] == "rackcert_drift_compared"}
    assert compared == {"rack-a": 1.0, "rack-b": 0.0}
    unreadable = {s[1]["spec"]: s[2] for s in got if s[0] == "rackcert_metrics_unreadable_runs"}
    assert unreadable == {"rack-a": 0.0, "rack-b": 1.0}


def test_metrics_answers_only_an_allowed_host(served) -> None:
    _root, port = served
    for host in ("evil.example", f"evil.example:{port}", "127.0.0.1:1"):
        resp = _get(port, host)
        assert resp.status == 421 and b"rackcert" not in resp.read()
    head = _get(port, f"localhost:{port}", "HEAD")
    assert head.status == 200 and head.read() == b""


def test_a_new_run_shows_at_the_next_scrape(served) -> None:
    """/metrics keeps its last body while no record changed; a new run changes it."""
    root, port = served
    first = _get(port, f"127.0.0.1:{port}").read()
    assert _get(port, f"127.0.0.1:{port}").read() == first
    _validate(RunDir.create(root, "rack-b", "b" * 64, "spec b"), "550.54.15", Status.failed)
    body = _get(port, f"127.0.0.1:{port}").read().decode()
    failed = {
        s.labels["spec"]: s.value
        for fam in text_string_to_metric_families(body)
        for s in fam.samples
        if s.name == "rackcert_check_failed"
    }
    assert failed == {"rack-a": 1.0, "rack-b": 1.0}
