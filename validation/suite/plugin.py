"""pytest plugin for the validate suite: job option, parallel gather, (node, check) cases."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from validation.checks import REGISTRY, load_all
from validation.facts import build_facts, fact_probes
from validation.gather import Gathered, Job, Target, gather, testinfra_host


@dataclass(frozen=True)
class Case:
    target: Target
    check_id: str

    @property
    def node(self) -> str:
        return self.target.expect.node


class Events:
    """Append-only JSON lines, one flush per line, so the runner sees progress live."""

    def __init__(self, path: str):
        self._lock = threading.Lock()
        self._handle = Path(path).open("a", encoding="utf-8")  # noqa: SIM115 - session-long

    def emit(self, **event: object) -> None:
        with self._lock:
            self._handle.write(json.dumps(event, default=str) + "\n")
            self._handle.flush()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--rackcert-job", dest="rackcert_job", help="validate job JSON")


def _job(config: pytest.Config) -> Job:
    path = config.getoption("rackcert_job")
    if not path:
        raise pytest.UsageError("--rackcert-job is required")
    return Job.model_validate_json(Path(path).read_text())


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "rackcert_case" not in metafunc.fixturenames:
        return
    job = _job(metafunc.config)
    load_all()
    cases = [Case(t, c) for t in job.targets for c in job.checks]
    ids = [f"{c.node}::{c.check_id}" for c in cases]
    metafunc.parametrize("rackcert_case", cases, ids=ids)


@pytest.fixture(scope="session")
def rackcert_job(request: pytest.FixtureRequest) -> Job:
    return _job(request.config)


@pytest.fixture(scope="session")
def rackcert_events(rackcert_job: Job) -> Events:
    return Events(rackcert_job.events)


@pytest.fixture(scope="session")
def rackcert_gathered(rackcert_job: Job, rackcert_events: Events) -> dict[str, Gathered]:
    """Every node's probes, gathered at once: the wall time is the slowest node's, not the sum.

    With a facts path in the job, the facts' commands ride in the same script and facts.json
    is written from those answers (validation.facts): one SSH session per node for both.
    """
    load_all()
    probes = sorted({p for c in rackcert_job.checks for p in REGISTRY[c].probes} | {"hostname"})
    extra = fact_probes() if rackcert_job.facts else []

    def one(target: Target) -> Gathered:
        got = gather(target, probes, rackcert_job.tool_path, extra)
        rackcert_events.emit(
            event="gathered",
            node=got.node,
            reachable=got.reachable,
            error=got.error,
            seconds=round(got.seconds, 3),
        )
        return got

    start = time.monotonic()
    workers = max(1, min(64, len(rackcert_job.targets)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(one, rackcert_job.targets))
    seconds = round(time.monotonic() - start, 3)
    if rackcert_job.facts:
        _write_facts(Path(rackcert_job.facts), results, seconds)
    rackcert_events.emit(event="gather_done", seconds=seconds)
    return {g.node: g for g in results}


def _write_facts(path: Path, gathered: list[Gathered], seconds: float) -> None:
    """facts.json from the gathered answers; facts are evidence, not a verdict: a failure to
    build them is recorded as the document's error, never a failed suite."""
    from rackcert.runs import atomic_write_json

    try:
        data = build_facts(
            {g.node: g.outputs for g in gathered if g.reachable},
            {g.node: g.error or "unreachable" for g in gathered if not g.reachable},
            seconds=seconds,
        )
    except Exception as exc:  # noqa: BLE001 - record why, keep the checks
        data = {"collector": "validate", "error": f"{type(exc).__name__}: {exc}", "nodes": {}}
    atomic_write_json(path, data)


@pytest.fixture
def host(rackcert_case: Case):
    """The testinfra Host of this case's node (the one its probes were gathered through)."""
    return testinfra_host(rackcert_case.target)
