"""The lab's real Prometheus: Debian's prometheus and prometheus-node-exporter on loopback.

Why: the alert rules and the metric names are a contract with a real Prometheus; a test
that only parses our own text proves the text, not that Prometheus scrapes it, stores the
series and fires the alert. So the lab runs the real thing, as a site would:

- node_exporter (textfile collector only) reads a directory where `rackcert validate
  --metrics-textfile` writes, the way a node's node_exporter does;
- Prometheus scrapes it and `rackcert serve`'s /metrics, evaluates
  monitoring/prometheus/rackcert.rules.yml, and answers its HTTP API.

Everything listens on 127.0.0.1 (ports picked free), keeps its data under `state_dir`,
and nothing leaves loopback (no remote write, no Alertmanager). For tests, the scrape
and evaluation intervals are short and every rule's `for:` can be shortened
(`short_for`): the rules' expressions stay exactly as shipped.

    mon = start_monitoring(state, serve="127.0.0.1:8765", rules=RULES, short_for="1s")
    mon.query('rackcert_check_failed == 1'); mon.alerts(); mon.stop()
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rackcert.core.errors import RackcertError

RULES = Path(__file__).resolve().parent.parent.parent / "monitoring" / "prometheus"
RULES_FILE = RULES / "rackcert.rules.yml"
# Debian's binaries (packages prometheus, prometheus-node-exporter).
PROMETHEUS = "prometheus"
NODE_EXPORTER = "prometheus-node-exporter"
# Loopback only: a proxy from the environment must never see a request of ours.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class MonitoringError(RackcertError):
    """The lab's Prometheus or node_exporter could not start or answer."""


def free_port() -> int:
    """A port free on 127.0.0.1 now (the daemons bind it right after)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, timeout: float = 5.0) -> bytes:
    if not url.startswith("http://127.0.0.1:"):
        raise MonitoringError(f"refusing a non-loopback URL: {url}")
    with _OPENER.open(url, timeout=timeout) as resp:
        return bytes(resp.read())


@dataclass
class Monitoring:
    """A running Prometheus + node_exporter pair; `stop()` ends exactly the two."""

    prometheus: str  # http://127.0.0.1:PORT
    node_exporter: str
    textfile_dir: Path
    state_dir: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/<path>: its `data`, or MonitoringError with Prometheus' own error."""
        query = urllib.parse.urlencode(params)
        body = json.loads(_get(f"{self.prometheus}/api/v1/{path}?{query}"))
        if body.get("status") != "success":
            raise MonitoringError(f"prometheus {path}: {body.get('error', body)}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's vector: [{'metric': {...}, 'value': [t, 'v']}, ...]."""
        return list(self.api("query", query=expr)["result"])

    def alerts(self) -> list[dict[str, Any]]:
        """Every alert Prometheus holds now, pending and firing."""
        return list(self.api("alerts")["alerts"])

    def targets_up(self) -> dict[str, str]:
        """job -> health of its active target."""
        active = self.api("targets")["activeTargets"]
        return {t["labels"]["job"]: t["health"] for t in active}

    def stop(self) -> None:
        """SIGTERM both, then SIGKILL what is left after 10 s (idempotent)."""
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)


def shortened_rules(rules: Path, into: Path, short_for: str) -> Path:
    """A copy of `rules` with every `for:` set to `short_for` (expressions untouched)."""
    doc = yaml.safe_load(rules.read_text())
    for group in doc.get("groups", []):
        for rule in group.get("rules", []):
            if "alert" in rule:
                rule["for"] = short_for
    out = into / rules.name
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def _config(serve: str | None, exporter: str, rules: Path, interval: str) -> dict[str, Any]:
    scrape = [{"job_name": "node", "static_configs": [{"targets": [exporter]}]}]
    if serve:
        scrape.append({"job_name": "rackcert-serve", "static_configs": [{"targets": [serve]}]})
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(rules)],
        "scrape_configs": scrape,
    }


def _wait_ready(
    name: str, url: str, proc: subprocess.Popen[bytes], log: Path, deadline: float
) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-3:]
            raise MonitoringError(f"{name} exited: {' | '.join(tail)}")
        with contextlib.suppress(OSError):
            _get(url, timeout=1.0)
            return
        time.sleep(0.2)
    raise MonitoringError(f"{name} did not answer {url} in time")


def _spawn(log: Path, args: list[str], detach: bool = False) -> subprocess.Popen[bytes]:
    """Start one daemon with its output in `log` (the parent keeps no handle open);
    `detach`: in its own session, to outlive the command that started it (`lab up`)."""
    with log.open("wb") as err:
        return subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=err, stderr=err, start_new_session=detach
        )


PORT_ATTEMPTS = 5  # a port found free can be taken by another process before we bind it


def _start_listening(
    name: str,
    args_for: Callable[[str], list[str]],
    ready_path: str,
    log: Path,
    detach: bool,
    deadline: float,
) -> tuple[subprocess.Popen[bytes], str]:
    """Start a daemon on a free loopback port; returns it and its host:port once it answers.

    Why the loop: `free_port` closes its probe socket before the daemon binds, and on a
    shared machine another process can take the port in between; the daemon then exits
    with "address already in use", and only then is another port tried.
    """
    for _ in range(PORT_ATTEMPTS):
        addr = f"127.0.0.1:{free_port()}"
        proc = _spawn(log, args_for(addr), detach)
        try:
            _wait_ready(name, f"http://{addr}{ready_path}", proc, log, deadline)
        except MonitoringError:
            said = log.read_text(errors="replace").lower()
            if proc.poll() is not None and "address already in use" in said:
                continue
            proc.terminate()
            raise
        return proc, addr
    raise MonitoringError(f"{name}: no free loopback port after {PORT_ATTEMPTS} attempts")


def start_monitoring(
    state_dir: Path,
    *,
    serve: str | None,
    rules: Path = RULES_FILE,
    interval: str = "1s",
    short_for: str | None = None,
    timeout_s: float = 60.0,
    detach: bool = False,
) -> Monitoring:
    """Start node_exporter and Prometheus under `state_dir`; returns once both answer.

    serve: host:port of `rackcert serve` to scrape (None: node_exporter only).
    """
    for binary in (PROMETHEUS, NODE_EXPORTER):
        if shutil.which(binary) is None:
            raise MonitoringError(
                f"{binary} not found: apt-get install prometheus prometheus-node-exporter"
            )
    state_dir.mkdir(parents=True, exist_ok=True)
    textfiles = state_dir / "textfiles"
    textfiles.mkdir(exist_ok=True)
    if short_for is not None:
        rules = shortened_rules(rules, state_dir, short_for)
    mon = Monitoring("", "", textfiles, state_dir)
    deadline = time.monotonic() + timeout_s
    try:
        proc, exporter = _start_listening(
            NODE_EXPORTER,
            lambda addr: [
                NODE_EXPORTER,
                f"--web.listen-address={addr}",
                "--collector.disable-defaults",
                "--collector.textfile",
                f"--collector.textfile.directory={textfiles}",
            ],
            "/metrics",
            state_dir / "node-exporter.log",
            detach,
            deadline,
        )
        mon.procs.append(proc)
        mon.node_exporter = f"http://{exporter}"
        config = state_dir / "prometheus.yml"
        config.write_text(yaml.safe_dump(_config(serve, exporter, rules, interval)))
        proc, prom = _start_listening(
            PROMETHEUS,
            lambda addr: [
                PROMETHEUS,
                f"--config.file={config}",
                f"--web.listen-address={addr}",
                f"--storage.tsdb.path={state_dir / 'tsdb'}",
            ],
            "/-/ready",
            state_dir / "prometheus.log",
            detach,
            deadline,
        )
        mon.procs.append(proc)
        mon.prometheus = f"http://{prom}"
    except BaseException:
        mon.stop()
        raise
    return mon


# -- `rackcert lab up --monitoring`: the same pair plus `rackcert serve`, detached ------------
STATE_FILE = "monitoring.json"
_NAMES = {"serve": b"serve", "node_exporter": b"node-exporter", "prometheus": b"prometheus"}


def _alive(pid: int, name: bytes) -> bool:
    """`pid` runs and is the daemon we started (its command line names it)."""
    try:
        return name in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def lab_monitoring_state(workdir: Path) -> dict[str, Any] | None:
    """The running lab monitoring's state (URLs, pids, textfile directory), or None."""
    try:
        state = json.loads((workdir / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    pids = state.get("pids", {})
    alive = all(_alive(int(pids[k]), _NAMES[k]) for k in _NAMES if k in pids)
    return state if alive and pids else None


def start_lab_monitoring(workdir: Path, runs_root: Path, *, interval: str = "5s") -> dict[str, Any]:
    """`rackcert serve` over `runs_root`, node_exporter and Prometheus (rules as shipped),
    detached, on loopback; their state in `workdir/monitoring.json`. Idempotent."""
    import sys

    state = lab_monitoring_state(workdir)
    if state is not None:
        return state
    base = workdir / "monitoring"
    base.mkdir(parents=True, exist_ok=True)
    serve_proc, serve = _start_listening(
        "rackcert serve",
        lambda addr: [sys.executable, "-m", "rackcert.cli", "serve", "--runs-dir",
                      str(runs_root), "--port", addr.rsplit(":", 1)[1]],
        "/api/runs",
        base / "serve.log",
        True,
        time.monotonic() + 60,
    )  # fmt: skip
    try:
        mon = start_monitoring(base, serve=serve, interval=interval, detach=True)
    except BaseException:
        serve_proc.terminate()
        raise
    state = {
        "prometheus": mon.prometheus,
        "node_exporter": mon.node_exporter,
        "serve": f"http://{serve}",
        "textfile_dir": str(mon.textfile_dir),
        "runs_dir": str(runs_root),
        "pids": {
            "serve": serve_proc.pid,
            "node_exporter": mon.procs[0].pid,
            "prometheus": mon.procs[1].pid,
        },
    }
    (workdir / STATE_FILE).write_text(json.dumps(state, indent=2))
    return state


def stop_lab_monitoring(workdir: Path) -> bool:
    """Stop what `start_lab_monitoring` started (only those pids); False: nothing ran."""
    import os
    import signal

    try:
        state = json.loads((workdir / STATE_FILE).read_text())
    except (OSError, ValueError):
        return False
    stopped = False
    for key, pid in state.get("pids", {}).items():
        if key in _NAMES and _alive(int(pid), _NAMES[key]):
            os.kill(int(pid), signal.SIGTERM)
            stopped = True
    deadline = time.monotonic() + 10
    for key, pid in state.get("pids", {}).items():
        while key in _NAMES and _alive(int(pid), _NAMES[key]) and time.monotonic() < deadline:
            time.sleep(0.1)
        if key in _NAMES and _alive(int(pid), _NAMES[key]):
            os.kill(int(pid), signal.SIGKILL)
    (workdir / STATE_FILE).unlink(missing_ok=True)
    return stopped
