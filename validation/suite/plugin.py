"""pytest plugin for the validate suite: job option, parallel gather, (node, check) cases.

Every node is gathered at once (threads, one testinfra SSH session per node) and judged
in the same thread as soon as it answers: each fact is parsed once, each check run once,
and a pytest case per (node, check) only reports its node's result. The case is what
pytest (and testinfra users) see; the work per case stays a dictionary look-up, which
is what keeps the controller's cost per node small (benchmarks/validate_fanout.py).
"""

from __future__ import annotations

import copy
import gc
import json
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rackcert.core.results import CheckResult, Status
from validation.checks import REGISTRY, NodeView, Outcome, facts_of, load_all, result, run_check
from validation.gather import Gathered, Job, Target, gather


@dataclass(frozen=True)
class Case:
    target: Target
    check_id: str

    @property
    def node(self) -> str:
        return self.target.expect.node


@dataclass
class Judged:
    """One node gathered and judged: its answer and every selected check's result."""

    gathered: Gathered
    view: NodeView
    results: dict[str, CheckResult] = field(default_factory=dict)


class CheckFailed(AssertionError):
    """A check judged its node failed; the message is the whole story (its reason and fix)."""


class CheckSkipped(pytest.skip.Exception):  # type: ignore[name-defined,misc]
    """A check did not apply to its node (or the node was not reached); the reason says why."""


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    """A failed or skipped check's report is its one line, without pytest's traceback.

    test_check's frame says nothing the line does not, and formatting it (pytest walks and
    filters the whole traceback, hook frames included) cost about 0.6 ms a failed case and
    0.1 ms a skipped one (benchmarks/validate_fanout.py): more than the rest of the case.
    A skip is placed at test_check, as pytest places a skip mark.
    """
    exc = call.excinfo
    if call.when != "call" or exc is None or type(exc.value) not in (CheckFailed, CheckSkipped):
        return None
    quiet = copy.copy(call)
    quiet.excinfo = None
    report = pytest.TestReport.from_item_and_call(item, quiet)
    if type(exc.value) is CheckFailed:  # pytest's summary line and JUnit show this text
        report.outcome, report.longrepr = "failed", str(exc.value)
    else:
        path, line = item.reportinfo()[:2]
        report.outcome = "skipped"
        report.longrepr = (os.fspath(path), (line or 0) + 1, f"Skipped: {exc.value}")
    return report


class Events:
    """Append-only JSON lines, one flush per line, so the runner sees progress live; the
    results are kept here too, for --rackcert-junit and --rackcert-results (no file when
    the suite was started the testinfra way without a job)."""

    def __init__(self, path: str):
        self._lock = threading.Lock()
        self.results: list[dict] = []
        self._handle = Path(path).open("a", encoding="utf-8") if path else None  # noqa: SIM115

    def emit(self, **event: object) -> None:
        line = json.dumps(event, default=str) + "\n"
        with self._lock:
            if event.get("event") == "result":
                self.results.append(event["result"])  # type: ignore[arg-type]
            if self._handle is not None:
                self._handle.write(line)
                self._handle.flush()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rackcert", "rackcert validate")
    group.addoption("--rackcert-job", dest="rackcert_job", help="validate job JSON (the runner's)")
    group.addoption(
        "--rackcert-spec",
        dest="rackcert_spec",
        help="Rack spec to judge testinfra's --hosts against (the testinfra way)",
    )
    group.addoption(
        "--rackcert-check",
        dest="rackcert_checks",
        action="append",
        default=[],
        help="Only checks with this id or prefix (repeatable)",
    )
    group.addoption(
        "--rackcert-peers", dest="rackcert_peers", help="ssh.peers: 'all' or extra peers (2)"
    )
    group.addoption(
        "--rackcert-tool-path", dest="rackcert_tool_path", help="PATH prefix on the nodes (fakes)"
    )
    group.addoption(
        "--rackcert-junit", dest="rackcert_junit", help="Write rackcert's JUnit XML here"
    )
    group.addoption(
        "--rackcert-results", dest="rackcert_results", help="Write the CheckResults (JSON) here"
    )


def _job(config: pytest.Config) -> Job:
    cached = getattr(config, "_rackcert_job", None)
    if cached is not None:
        return cached
    path = config.getoption("rackcert_job")
    spec = config.getoption("rackcert_spec")
    if path:
        job = Job.model_validate_json(Path(path).read_text())
    elif spec:
        job = _testinfra_job(config, spec)
    else:
        raise pytest.UsageError("give --rackcert-spec SPEC with testinfra's --hosts")
    config._rackcert_job = job  # type: ignore[attr-defined]
    return job


def pytest_configure(config: pytest.Config) -> None:
    """Read the job before collection: bad --hosts or --rackcert-spec is one usage line."""
    _RUNNING["config"] = config
    if config.getoption("rackcert_job") or config.getoption("rackcert_spec"):
        _job(config)


def _testinfra_job(config: pytest.Config, spec: str) -> Job:
    """The job of `pytest --hosts=... --rackcert-spec SPEC` (validation.suite.hosts)."""
    from rackcert.core.errors import InputError
    from validation.peer_choice import parse_k
    from validation.suite.hosts import HostsError, job_from_hosts

    hosts = _opt(config, "hosts")
    if not hosts:
        raise pytest.UsageError("--rackcert-spec needs testinfra's --hosts=ssh://user@addr,...")
    try:
        return job_from_hosts(
            spec,
            hosts,
            checks=config.getoption("rackcert_checks") or None,
            identity_file=_opt(config, "ssh_identity_file"),
            ssh_config=_opt(config, "ssh_config"),
            peers=parse_k(config.getoption("rackcert_peers")),
            tool_path=config.getoption("rackcert_tool_path"),
        )
    except (HostsError, InputError) as exc:
        raise pytest.UsageError(str(exc)) from None


def _opt(config: pytest.Config, name: str) -> str | None:
    """One of testinfra's options (None where testinfra's plugin is not loaded)."""
    try:
        value = config.getoption(name)
    except ValueError:
        return None
    return str(value) if value else None


def pytest_unconfigure(config: pytest.Config) -> None:
    if _RUNNING.get("config") is config:
        del _RUNNING["config"]


def pytest_sessionfinish(session: pytest.Session) -> None:
    """--rackcert-junit / --rackcert-results: the same JUnit and results validate records."""
    config = session.config
    junit, out = config.getoption("rackcert_junit"), config.getoption("rackcert_results")
    events: Events | None = getattr(config, "_rackcert_events", None)
    if not (junit or out) or events is None:
        return
    results = [CheckResult.model_validate(r) for r in events.results]
    order = {c: i for i, c in enumerate(_job(config).checks)}
    nodes = {t.expect.node: i for i, t in enumerate(_job(config).targets)}
    results.sort(key=lambda r: (nodes.get(r.node, len(nodes)), order.get(r.id, len(order))))
    if junit:
        from validation.junit import write_junit

        write_junit(Path(junit), results)
    if out:
        from rackcert.core.runs import atomic_write_json

        atomic_write_json(Path(out), [r.model_dump(mode="json") for r in results])


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "rackcert_case" not in metafunc.fixturenames:
        return
    job = _job(metafunc.config)
    load_all()
    cases = [Case(t, c) for t in job.targets for c in job.checks]
    ids = [f"{c.node}::{c.check_id}" for c in cases]
    metafunc.parametrize("rackcert_case", cases, ids=ids)


# The config of the pytest run this plugin serves (pytest_configure sets it). The session
# fixtures read it here: a fixture that asks for `request` (or `pytestconfig`, which asks
# for it) makes pytest build a `request` fixture definition again for every case (several
# a case, each with an inspect.signature), about a fifth of a case's cost.
_RUNNING: dict[str, pytest.Config] = {}


@pytest.fixture(scope="session")
def rackcert_job() -> Job:
    return _job(_RUNNING["config"])


@pytest.fixture(scope="session")
def rackcert_events(rackcert_job: Job) -> Events:
    events = Events(rackcert_job.events)
    _RUNNING["config"]._rackcert_events = events  # type: ignore[attr-defined]
    return events


def judge(got: Gathered, target: Target, check_ids: list[str]) -> Judged:
    """Every check on one gathered node (an unreachable node fails node.reachable and
    skips the rest)."""
    view = NodeView(target.expect, got.outputs)
    judged = Judged(got, view)
    out = judged.results
    for check_id in check_ids:
        defn = REGISTRY[check_id]
        if got.reachable:
            out[check_id] = run_check(defn, view)
        elif defn.id == "node.reachable":
            seen = Outcome(Status.failed, "unreachable", target.hostspec, got.error)
            out[check_id] = result(defn, got.node, seen)
        else:
            skip = Outcome(Status.skipped, reason="not run: node unreachable")
            out[check_id] = result(defn, got.node, skip)
    return judged


@pytest.fixture(scope="session")
def rackcert_gathered(rackcert_job: Job, rackcert_events: Events) -> Iterator[dict[str, Judged]]:
    """Every node's facts, gathered at once (the wall time is the slowest node's, not the
    sum) and judged as each node answers.

    With a facts path in the job, facts.json is written from the same answers
    (validation.snapshot): one SSH session per node for both.
    """
    from validation.facts import snapshot

    load_all()
    # What exists now (modules, pytest's items, the job) lives until the process ends: out
    # of the cyclic collector's sight, its full passes scan only the facts being parsed.
    # Parsing every node's facts and running a case per check allocate far more than they
    # leave as cycles, so the collector runs less often until the session ends. Together
    # about a tenth of the suite's CPU, more as the rack grows (benchmarks/validate_fanout.py).
    gc.freeze()
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], 20_000), *thresholds[1:])
    facts = facts_of([REGISTRY[c] for c in rackcert_job.checks])
    if rackcert_job.facts and rackcert_job.snapshot:
        known = set(facts)
        facts += [f for f in snapshot() if f not in known]

    def one(target: Target) -> Judged:
        got = gather(target, facts, rackcert_job.tool_path)
        rackcert_events.emit(
            event="gathered",
            node=got.node,
            reachable=got.reachable,
            error=got.error,
            seconds=round(got.seconds, 3),
        )
        return judge(got, target, rackcert_job.checks)

    start = time.monotonic()
    workers = max(1, min(64, len(rackcert_job.targets)))
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            judged = list(pool.map(one, rackcert_job.targets))
        seconds = round(time.monotonic() - start, 3)
        if rackcert_job.facts:
            _write_facts(Path(rackcert_job.facts), judged, facts, seconds)
        rackcert_events.emit(event="gather_done", seconds=seconds)
        yield {j.gathered.node: j for j in judged}
    finally:
        gc.set_threshold(*thresholds)


def _write_facts(path: Path, judged: list[Judged], facts: list, seconds: float) -> None:
    """facts.json from the gathered answers; facts are evidence, not a verdict: a failure to
    build them is recorded as the document's error, never a failed suite."""
    from rackcert.core.runs import atomic_write_json
    from validation.snapshot import build_facts

    reached = {j.gathered.node: j.view for j in judged if j.gathered.reachable}
    errors = {
        j.gathered.node: j.gathered.error or "unreachable"
        for j in judged
        if not j.gathered.reachable
    }
    try:
        data = build_facts(reached, errors, facts=facts, seconds=seconds)
    except Exception as exc:  # noqa: BLE001 - record why, keep the checks
        data = {"collector": "validate", "error": f"{type(exc).__name__}: {exc}", "nodes": {}}
    atomic_write_json(path, data, indent=None)  # compact: it grows with nodes x packages
