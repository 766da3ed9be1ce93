"""A real Prometheus watches the lab: the planted failure and drift reach it and alert.

Two SSH test hosts (network namespaces) with the fake nvidia-smi are validated and the run
is certified; then node2 gets a driver upgrade within the pinned branch (a drift that
passes its check) and persistence mode off (a failing check). validate runs again with
--metrics-textfile into the directory Debian's node_exporter reads, `rackcert serve`
serves the runs directory, and Debian's Prometheus scrapes both on loopback and evaluates
monitoring/prometheus/rackcert.rules.yml (each `for:` shortened to 1 s; the expressions
as shipped). The series and the alerts are read back through Prometheus' HTTP API.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rackcert.core.runs import RunDir, list_runs
from rackcert.lab.monitoring import Monitoring, start_monitoring
from rackcert.serve import make_server
from tests.support.validate_nodes import A100, write_spec

ROOT = Path(__file__).resolve().parents[2]


def _validate(spec: Path, runs: Path, tools: str, *more: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "validate", str(spec), "--runs-dir", str(runs),
         "--tool-path", tools, "--check", "gpu", "--no-facts", *more],
        capture_output=True, text=True, cwd=ROOT, timeout=300, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def watched(ssh_hosts_module, tmp_path_factory) -> Iterator[tuple[Monitoring, str]]:
    tmp = tmp_path_factory.mktemp("watched")
    hosts = ssh_hosts_module(2)
    for h in hosts:  # the spec's key for SSH from rackcert; no peer checks run here
        h.path("/root/.ssh").mkdir(parents=True, exist_ok=True)
    spec = write_spec(tmp / "vtest.yaml", hosts, tmp)
    # Pin the driver branch, not the build: an upgrade within it passes gpu.driver, so the
    # driver's drift is seen only as drift.
    spec.write_text(spec.read_text().replace("nvidia_driver: 470.82.01", "nvidia_driver: '470'"))
    fakes = tmp / "fakes"
    shutil.copytree(ROOT / "tests" / "support" / "fakes", fakes / "fakes", symlinks=True)
    shutil.copytree(ROOT / "tests" / "support" / "fixtures" / "h200", fakes / "fixtures" / "h200")

    def tools(configs: dict[str, dict]) -> str:
        import json

        for node, cfg in configs.items():
            d = tmp / "tools" / node
            d.mkdir(parents=True, exist_ok=True)
            if not (d / "nvidia-smi").exists():
                (d / "nvidia-smi").symlink_to(fakes / "fakes" / "fake-nvidia-smi")
            (d / "fake-nvidia-smi.json").write_text(json.dumps(cfg))
        return str(tmp / "tools" / "{node}")

    runs = tmp / "runs"
    first = _validate(spec, runs, tools({"node1": A100, "node2": A100}))
    assert first.returncode == 0, first.stdout + first.stderr
    RunDir.open(list_runs(runs)[-1].path).write_stage("report", {"verdict": "PASS"})

    server = make_server(runs, "127.0.0.1", 0)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    serve = f"127.0.0.1:{server.server_address[1]}"
    mon = start_monitoring(tmp / "prometheus", serve=serve, short_for="1s")
    try:
        planted = {**A100, "driver": "470.103.01", "fields": {"persistence_mode": "Disabled"}}
        second = _validate(
            spec, runs, tools({"node1": A100, "node2": planted}),
            "--metrics-textfile", str(mon.textfile_dir / "rackcert.prom"),
        )  # fmt: skip
        assert second.returncode == 1, second.stdout + second.stderr
        assert "drift node2 version nvidia_driver: 470.82.01 -> 470.103.01" in second.stdout
        _scraped(mon)
        yield mon, second.stdout
    finally:
        mon.stop()
        server.shutdown()
        server.server_close()


def _scraped(mon: Monitoring, deadline_s: float = 60.0) -> None:
    """Wait until Prometheus has scraped the planted failure from both targets: the tests
    read what it holds, and each must not depend on another having waited first (xdist may
    give a module's tests to both workers, each with its own fresh Prometheus)."""
    end = time.monotonic() + deadline_s
    want = {("node", "node2"), ("rackcert-serve", "node2")}
    while True:
        failed = mon.query('rackcert_check_failed{check="gpu.persistence"} == 1')
        got = {(r["metric"]["job"], r["metric"]["node"]) for r in failed}
        if want <= got:
            return
        assert time.monotonic() < end, f"Prometheus has not scraped the planted failure: {got}"
        time.sleep(0.5)


def _firing(mon: Monitoring, want: set[tuple[str, str]], deadline_s: float = 60.0) -> list[dict]:
    """Poll /api/v1/alerts until every (alertname, node) in `want` fires (or time is up)."""
    end = time.monotonic() + deadline_s
    while True:
        firing = [a for a in mon.alerts() if a["state"] == "firing"]
        got = {(a["labels"]["alertname"], a["labels"].get("node", "")) for a in firing}
        if want <= got or time.monotonic() > end:
            return firing
        time.sleep(0.5)


def test_the_failing_check_and_the_drift_fire_their_alerts_for_node2_only(watched) -> None:
    mon, _out = watched
    want = {("RackcertCheckFailed", "node2"), ("RackcertDriftFromCertified", "node2"),
            ("RackcertRegressedSinceCertified", "node2")}  # fmt: skip
    firing = _firing(mon, want)
    got = {(a["labels"]["alertname"], a["labels"].get("node", "")) for a in firing}
    assert want <= got, got
    assert not any(node == "node1" for _, node in got), got
    checks = {
        a["labels"].get("check")
        for a in firing
        if a["labels"]["alertname"] == "RackcertCheckFailed"
    }
    assert checks == {"gpu.persistence"}
    worse = [
        a["labels"] for a in firing if a["labels"]["alertname"] == "RackcertRegressedSinceCertified"
    ]
    assert [(w["kind"], w["item"]) for w in worse] == [("check", "gpu.persistence")]


def test_the_series_exist_from_the_textfile_and_from_serve(watched) -> None:
    mon, _out = watched
    assert mon.targets_up() == {"node": "up", "rackcert-serve": "up"}
    failed = mon.query('rackcert_check_failed{check="gpu.persistence"}')
    by = {(r["metric"]["job"], r["metric"]["node"]): r["value"][1] for r in failed}
    assert by == {("node", "node1"): "0", ("node", "node2"): "1",
                  ("rackcert-serve", "node1"): "0", ("rackcert-serve", "node2"): "1"}  # fmt: skip
    drift = mon.query('rackcert_drift{kind="version",item="nvidia_driver"}')
    assert {(r["metric"]["job"], r["metric"]["node"], r["metric"]["before"], r["metric"]["after"])
            for r in drift} == {("node", "node2", "470.82.01", "470.103.01"),
                                ("rackcert-serve", "node2", "470.82.01", "470.103.01")}  # fmt: skip
    items = mon.query('rackcert_drift_items{job="node"}')
    assert {r["metric"]["node"]: r["value"][1] for r in items} == {"node1": "0", "node2": "3"}
    assert mon.query("node_textfile_scrape_error")[0]["value"][1] == "0"


def test_every_dashboard_query_runs_on_the_real_prometheus(watched) -> None:
    """The Grafana dashboard's queries, with its $spec variable set to the lab's rack:
    Prometheus accepts each, and the check matrix and drift table have the planted rows."""
    import json

    mon, _out = watched
    dash = json.loads((ROOT / "monitoring" / "grafana" / "rackcert-dashboard.json").read_text())
    exprs = {p["title"]: [t["expr"].replace("$spec", "vtest") for t in p["targets"]]
             for p in dash["panels"]}  # fmt: skip
    results = {title: [mon.query(e) for e in es] for title, es in exprs.items()}  # no error
    matrix = results["Check matrix: node x check (1 = failed)"][0]
    cells = {(r["metric"]["node"], r["metric"]["check"]): r["value"][1] for r in matrix}
    assert cells[("node2", "gpu.persistence")] == "1" and cells[("node1", "gpu.persistence")] == "0"
    drift = results["Drift from the certified run"][0]
    assert {r["metric"]["node"] for r in drift} == {"node2"}
    failing = results["Nodes failing an error-severity check"][0]
    assert failing[0]["value"][1] == "1"
