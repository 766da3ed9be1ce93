"""`rackcert lab up --monitoring`'s part: serve, node_exporter and Prometheus started
detached on loopback, found again by a second `up`, and stopped by `down` (only them)."""

from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path

from rackcert.lab.monitoring import (
    STATE_FILE,
    lab_monitoring_state,
    start_lab_monitoring,
    stop_lab_monitoring,
)
from tests.support.metrics_rules import SHIPPED_ALERTS

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only


def _api(base: str, path: str) -> dict:
    with _OPENER.open(f"{base}/api/v1/{path}", timeout=10) as resp:
        return json.loads(resp.read())["data"]


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status").read_text()
    return "State:\tZ" not in status


def test_lab_monitoring_up_again_and_down(tmp_path: Path) -> None:
    workdir, runs = tmp_path / "lab", tmp_path / "runs"
    workdir.mkdir()
    state = start_lab_monitoring(workdir, runs, interval="1s")
    try:
        assert all(url.startswith("http://127.0.0.1:") for url in
                   (state["prometheus"], state["node_exporter"], state["serve"]))  # fmt: skip
        assert start_lab_monitoring(workdir, runs)["pids"] == state["pids"]  # found, not doubled
        groups = _api(state["prometheus"], "rules")["groups"]
        names = {r["name"] for g in groups for r in g["rules"]}
        assert names == SHIPPED_ALERTS  # the shipped rules, as they are, every one loaded
        for_s = {r["name"]: r["duration"] for g in groups for r in g["rules"]}
        assert for_s["RackcertDriftFromCertified"] == 300  # for: 5m, not shortened
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            active = _api(state["prometheus"], "targets")["activeTargets"]
            health = {t["labels"]["job"]: t["health"] for t in active}
            if health == {"node": "up", "rackcert-serve": "up"}:
                break
            time.sleep(0.5)
        assert health == {"node": "up", "rackcert-serve": "up"}
    finally:
        stopped = stop_lab_monitoring(workdir)
    assert stopped and not (workdir / STATE_FILE).exists()
    assert lab_monitoring_state(workdir) is None
    time.sleep(0.5)
    assert not any(_running(int(pid)) for pid in state["pids"].values())
    assert stop_lab_monitoring(workdir) is False  # down again: nothing to stop


def test_a_port_taken_between_probe_and_bind_is_retried(tmp_path: Path, monkeypatch) -> None:
    """The race `free_port` leaves open, forced: the first port offered is held by another
    socket; node_exporter exits with "address already in use" and the next port is used."""
    import socket

    from rackcert.lab import monitoring

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    taken = holder.getsockname()[1]
    real = monitoring.free_port
    offered = iter([taken])
    monkeypatch.setattr(monitoring, "free_port", lambda: next(offered, None) or real())
    try:
        mon = monitoring.start_monitoring(tmp_path / "m", serve=None)
        try:
            assert mon.node_exporter != f"http://127.0.0.1:{taken}"
            log = (tmp_path / "m" / "node-exporter.log").read_text().lower()
            assert "address already in use" not in log  # the log of the attempt that worked
        finally:
            mon.stop()
    finally:
        holder.close()
