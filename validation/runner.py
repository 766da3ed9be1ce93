"""The validate fan-out: every node at once, live progress, one record.

One pytest process (validation/suite) gathers all nodes' probes in parallel, one
SSH session per node that also answers the facts snapshot (facts.json), and
judges them; meanwhile the hypervisor checks run here over the recorded
discovery. The runner follows the suite's events file for a rich progress
display, then merges everything into validate.json (through RunDir.write_stage)
and JUnit XML.

    >>> record = validate(loaded, run, runs_root=Path("runs"))
    >>> record.status, record.data.summary.failed
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from rackcert.core.check_components import CHECK_COMPONENTS
from rackcert.core.errors import InputError
from rackcert.core.known_hosts import enroll, is_pinned, peer_lines, rack_file
from rackcert.core.observed import Inventory
from rackcert.core.results import CheckResult, Severity, Status
from rackcert.core.runs import RunDir, atomic_write_bytes_checked, atomic_write_json, utc_now
from rackcert.core.spec_loader import LoadedSpec
from rackcert.core.ssh_target import SshTarget
from rackcert.core.stage_records import ValidateRecord
from rackcert.core.untrusted import cap_strings
from validation.checks import load_all, matches, select
from validation.expect import NodeExpect, expectations
from validation.gather import Job, Target
from validation.host_software import with_vgpu_managers
from validation.hypervisor_results import discovery_record, hv_ids, hypervisor_results, no_discovery
from validation.junit import write_junit
from validation.peer_choice import DEFAULT_K, History, Plan
from validation.peer_choice import choose as choose_peers
from validation.peer_choice import previous as peer_history

SUITE = Path(__file__).resolve().parent / "suite" / "test_checks.py"
TOOL_PATH_ENV = "RACKCERT_TOOL_PATH"


def targets(
    loaded: LoadedSpec,
    run: RunDir,
    *,
    nodes: list[str] | None = None,
    local: bool = False,
    ssh_config: Path | None = None,
    need_key: bool = True,
    known_hosts: Path | None = None,
) -> list[Target]:
    """Who to validate and how to reach them; an unknown --node is an input error."""
    spec = loaded.spec
    expects = expectations(spec)
    if nodes:
        unknown = [n for n in nodes if n not in expects]
        if unknown:
            raise InputError(
                f"unknown node {', '.join(unknown)} (VMs in {loaded.path}:"
                f" {', '.join(expects) or 'none'})"
            )
    if local:
        if not expects:
            raise InputError(f"{loaded.path}: the spec has no VM to validate this machine as")
        name = (nodes or list(expects))[0]
        return [Target(expect=expects[name], hostspec="local://")]
    chosen: list[NodeExpect] = [expects[n] for n in (nodes or list(expects))]
    key = spec.guest.ssh.key_file
    key_path = str(Path(key).expanduser()) if key else None
    if need_key and key_path and not Path(key_path).is_file():
        raise InputError(f"guest.ssh.key_file {key} does not exist; create it or fix the spec")
    # The rack's known_hosts unless the caller's own ssh_config decides (no enrolment then).
    pins = None if ssh_config or known_hosts is None else str(known_hosts)
    return [
        Target(
            expect=e,
            ssh=SshTarget(
                host=e.address,
                user=e.user,
                port=e.ssh_port,
                identity_file=key_path,
                known_hosts=pins,
                ssh_config=str(ssh_config) if ssh_config else None,
            ),
        )
        for e in chosen
    ]


def _suite_cmd(job_path: Path, art: Path) -> list[str]:
    ini = art / "pytest.ini"
    atomic_write_bytes_checked(ini, b"[pytest]\naddopts =\n")
    return [
        sys.executable,
        "-m",
        "pytest",
        str(SUITE),
        "-c",
        str(ini),
        "--rootdir",
        str(art),
        "-p",
        "validation.suite.plugin",
        "-p",
        "no:cacheprovider",
        # Per case, these wrap every phase in log capture, a warnings filter, fd capture,
        # unraisable/thread exception hooks and tmp_path bookkeeping: about a third of
        # pytest's cost a case, for a check that prints, logs, warns and writes nothing
        # (pytest.log keeps stderr; a gather thread's exception reaches its fixture).
        *("-p", "no:logging", "-p", "no:warnings", "--capture=no"),
        *("-p", "no:unraisableexception", "-p", "no:threadexception", "-p", "no:tmpdir"),
        "--rackcert-job",
        str(job_path),
        "-q",
        "-rN",
        "--tb=no",
        "--no-header",
    ]


def _child_env() -> dict[str, str]:
    """A short named environment (rackcert.core.childenv): no password variable reaches it."""
    from rackcert.core.childenv import child_env

    root = str(Path(__file__).resolve().parent.parent)
    path = root + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")
    return child_env({"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": path})


class _Follow:
    """Reads the events file as it grows."""

    def __init__(self, path: Path):
        self.path, self.offset, self.buf = path, 0, ""

    def read(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("r", encoding="utf-8") as handle:
                handle.seek(self.offset)
                chunk = handle.read()
                self.offset = handle.tell()
        except FileNotFoundError:
            return []
        self.buf += chunk
        lines = self.buf.split("\n")
        self.buf = lines.pop()
        return [json.loads(ln) for ln in lines if ln.strip()]


def _progress(console, nodes: list[str], total: int):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=console is None,
    )
    tasks = {n: progress.add_task(f"{n}: gathering", total=total) for n in nodes}
    return progress, tasks


def _selection(checks: list[str] | None, skip: list[str] | None):
    """(guest CheckDefs, hypervisor patterns, run hypervisor?) from --check and --skip."""
    patterns = list(checks or [])
    hv_patterns = [p for p in patterns if any(matches(i, p) for i in hv_ids())]
    guest_patterns = [p for p in patterns if p not in hv_patterns]
    defs = select(guest_patterns) if guest_patterns or not patterns else []
    if skip:
        known = list(load_all())
        unknown = [p for p in skip if not any(matches(i, p) for i in known)]
        if unknown:
            raise InputError(f"--skip {', '.join(unknown)}: no such check id")
        defs = [d for d in defs if not any(matches(d.id, p) for p in skip)]
    return defs, hv_patterns, not patterns or bool(hv_patterns)


def _hypervisor(
    loaded: LoadedSpec,
    found: tuple[Inventory, str] | None,
    nodes: list[str] | None,
    patterns: list[str],
    skip: list[str],
) -> tuple[list[CheckResult], str | None]:
    """Hypervisor checks over the newest recorded discovery (`found`: it and where it was
    read from, validation.hypervisor_results.discovery_record), and where it was read from."""
    spec = loaded.spec
    if found is None:
        return [no_discovery(spec.metadata.name)], None
    inventory, source = found
    results = hypervisor_results(spec, inventory, nodes)
    if patterns:
        results = [r for r in results if any(matches(r.id, p) for p in patterns)]
    return [r for r in results if not any(matches(r.id, p) for p in skip)], source


def _start(art: Path, job_path: Path, with_suite: bool) -> dict[str, subprocess.Popen]:
    """Start the check suite (which also writes facts.json when the job asks)."""
    procs: dict[str, subprocess.Popen] = {}
    if with_suite:
        with (art / "pytest.log").open("wb") as log:
            procs["suite"] = subprocess.Popen(
                _suite_cmd(job_path, art), stdout=log, stderr=subprocess.STDOUT, env=_child_env()
            )
    return procs


def _follow(procs, events: Path, names: list[str], total: int, console, deadline_s: float):
    """Show progress from the suite's events until it ends (or is killed at the deadline)."""
    gathered: dict[str, dict[str, Any]] = {}
    results: list[CheckResult] = []
    follow = _Follow(events)
    progress, tasks = _progress(console, names, total)
    suite = procs.get("suite")
    end = time.monotonic() + deadline_s
    with progress:
        while True:
            done = suite is None or suite.poll() is not None
            for ev in follow.read():
                if ev.get("event") == "gathered":
                    gathered[ev["node"]] = ev
                    state = "checking" if ev["reachable"] else "[red]unreachable[/]"
                    progress.update(tasks[ev["node"]], description=f"{ev['node']}: {state}")
                elif ev.get("event") == "result":
                    res = CheckResult.model_validate(ev["result"])
                    results.append(res)
                    progress.advance(tasks[res.node])
            if done:
                break
            if time.monotonic() > end:
                suite.kill()
            # Live bars want a quick refresh; without a terminal, poll less (it costs CPU).
            time.sleep(0.05 if console is not None else 0.25)
    rc = suite.wait() if suite else 0
    return gathered, results, rc


def validate(
    loaded: LoadedSpec,
    run: RunDir,
    *,
    runs_root: Path,
    nodes: list[str] | None = None,
    checks: list[str] | None = None,
    skip: list[str] | None = None,
    local: bool = False,
    tool_path: str | None = None,
    junit: Path | None = None,
    ssh_config: Path | None = None,
    facts: bool = True,
    hypervisor: bool | None = None,
    peers: int | str = DEFAULT_K,
    console=None,
    deadline_s: float = 900.0,
    enrol: bool = True,
) -> ValidateRecord:
    """Validate the spec's nodes, record validate.json + JUnit (+ facts.json) and return the
    record as written; never raises for a failing or unreachable node (only for bad input).

    The rack's known_hosts is `rack_file(spec, runs_root)`; `enrol=False` (a roll) trusts
    only the keys already in it."""
    started, t0 = utc_now(), time.monotonic()
    skip = list(skip or [])
    defs, hv_patterns, hv_selected = _selection(checks, skip)
    known_hosts = rack_file(loaded.spec, runs_root) if not local and ssh_config is None else None
    tgts = targets(
        loaded,
        run,
        nodes=nodes,
        local=local,
        ssh_config=ssh_config,
        need_key=bool(defs),
        known_hosts=known_hosts,
    )
    # The recorded discovery (a provision record runs to megabytes) is read once: here when
    # vGPU guests' expectations need it (gpu.vgpu.branch judges a guest against its host),
    # else for the hypervisor checks while the guests answer.
    vgpu = any(t.expect.vgpu for t in tgts)
    found = discovery_record(loaded.spec.metadata.name, run, runs_root) if vgpu else None
    if vgpu:
        tgts = with_vgpu_managers(tgts, loaded.spec, found[0] if found else None)
    names = [t.expect.node for t in tgts]
    mesh = _peer_plan(loaded, run, tgts, defs, peers) if not local else None
    if mesh is not None:
        tgts = _with_chosen_peers(tgts, mesh[1])
    tool_path = tool_path or os.environ.get(TOOL_PATH_ENV) or None
    art = run.artifacts("validate")
    events = art / "events.jsonl"
    events.unlink(missing_ok=True)
    host_keys = _enroll(loaded, known_hosts, tgts, enrol) if known_hosts is not None else None
    if host_keys:
        tgts = _with_peer_keys(tgts, Path(host_keys["known_hosts"]))
    facts_path = run.path / "facts.json"
    job = Job(
        targets=tgts,
        checks=[d.id for d in defs],
        tool_path=tool_path,
        events=str(events),
        facts=str(facts_path) if defs else None,
        snapshot=facts,
    )
    job_path = art / "job.json"
    atomic_write_bytes_checked(job_path, job.model_dump_json(indent=2).encode())
    procs = _start(art, job_path, bool(defs))

    hv_results: list[CheckResult] = []
    hv_source: str | None = None  # hypervisor checks run here while the guests answer
    if hypervisor if hypervisor is not None else (hv_selected and not local):
        if not vgpu:
            found = discovery_record(loaded.spec.metadata.name, run, runs_root)
        scope = names if nodes else None
        hv_results, hv_source = _hypervisor(loaded, found, scope, hv_patterns, skip)

    gathered, guest, suite_rc = _follow(procs, events, names, len(defs), console, deadline_s)
    guest += _not_run(defs, names, guest, art, suite_rc)
    order = {d.id: i for i, d in enumerate(defs)}
    rank = {n: i for i, n in enumerate(names)}
    guest.sort(key=lambda r: (rank.get(r.node, len(rank)), order.get(r.id, len(order))))
    results = guest + hv_results
    node_info = _nodes(tgts, gathered, results, guest_run=bool(defs))
    summary = _summary(results, time.monotonic() - t0)
    data = {
        # A node's long value is cut here; events.jsonl (and junit.xml) keep the whole.
        "results": [
            cap_strings(r.model_dump(mode="json"), where="artifacts/validate/events.jsonl")
            for r in results
        ],
        "nodes": node_info,
        "summary": summary,
        "checks": [d.id for d in defs],
        "skipped_by_request": skip,
        "local": local,
        "hypervisor_source": hv_source,
        "facts": str(facts_path.name) if defs and facts_path.is_file() else None,
        "tool_path": tool_path,
        "host_keys": host_keys,
        "peers": _peer_record(run, mesh, results) if mesh is not None else None,
    }
    write_junit(art / "junit.xml", results)
    if junit:
        write_junit(junit, results)
    status = "ok" if summary["ok"] else "failed"
    error = None if summary["ok"] else f"{summary['error_failures']} error-severity check(s) failed"
    record = run.write_stage("validate", data, status=status, error=error, started_at=started)
    assert isinstance(record, ValidateRecord)
    return record


def _peer_plan(
    loaded: LoadedSpec, run: RunDir, tgts: list[Target], defs: list, k: int | str
) -> tuple[History | None, Plan] | None:
    """This run's choice of peers for ssh.peers (validation.peer_choice), from the rack's history;
    None when ssh.peers is not among the checks."""
    if not any(d.id == "ssh.peers" for d in defs):
        return None
    every = list(expectations(loaded.spec))
    history = peer_history(run.path.parent, run.path)
    sources = [t.expect.node for t in tgts]
    return history, choose_peers(every, run.path.name, k=k, history=history, sources=sources)


def _with_chosen_peers(tgts: list[Target], plan: Plan) -> list[Target]:
    out = []
    for t in tgts:
        wanted = set(plan.chosen.get(t.expect.node, []))
        kept = [p for p in t.expect.peers if p.name in wanted]
        out.append(t.model_copy(update={"expect": t.expect.model_copy(update={"peers": kept})}))
    return out


def _peer_record(
    run: RunDir, mesh: tuple[History | None, Plan], results: list[CheckResult]
) -> dict[str, Any]:
    """The pairs checked, the runs since each was last checked, and the mesh's coverage;
    the history for the next run goes to peers.json."""
    from validation.peer_choice import HISTORY_FILE, coverage, record

    history, plan = mesh
    after = record(history, plan)
    atomic_write_json(run.path / HISTORY_FILE, after.to_dict())
    return {
        "mode": plan.mode,
        "k": plan.k,
        "seed": plan.seed,
        "round": plan.round,
        "pairs": [{"node": n, "peer": p, "since": s} for n, p, s in plan.pairs()],
        "checked": len(plan.since),
        "history": HISTORY_FILE,
        **coverage(after, plan.nodes),
    }


def _enroll(loaded: LoadedSpec, path: Path, tgts: list[Target], enrol: bool) -> dict[str, Any]:
    """Enrol the nodes and their peers the rack's known_hosts does not know yet (first
    contact; never in a roll, `enrol` off); recorded in validate.json (host_keys), which the
    CLI shows."""
    spec = loaded.spec
    hosts = [(t.expect.address, t.expect.ssh_port) for t in tgts]
    hosts += [(p.address, p.port) for t in tgts for p in t.expect.peers]
    enrolled = enroll(path, hosts, pinned=is_pinned(spec)) if enrol else []
    return {
        "known_hosts": str(path),
        "pinned": is_pinned(spec),
        "enrolled": [e.to_dict() for e in enrolled],
    }


def _with_peer_keys(tgts: list[Target], known_hosts: Path) -> list[Target]:
    """Each target's peers' enrolled keys, for its ssh.peers probe (StrictHostKeyChecking=yes
    against exactly those)."""
    out = []
    for t in tgts:
        peers = [(p.name, p.address, p.port) for p in t.expect.peers]
        lines = peer_lines(known_hosts, peers) if peers and known_hosts.is_file() else []
        expect = t.expect.model_copy(update={"peer_known_hosts": lines})
        out.append(t.model_copy(update={"expect": expect}))
    return out


def _not_run(defs, names, got: list[CheckResult], art: Path, rc: int) -> list[CheckResult]:
    """Checks the suite never reported (it crashed or was killed): errors, never silence."""
    seen = {(r.node, r.id) for r in got}
    log = (art / "pytest.log").read_text(errors="replace") if (art / "pytest.log").is_file() else ""
    tail = " ".join(log.strip().splitlines()[-1:])[:200]
    return [
        CheckResult(
            id=d.id,
            node=n,
            severity=d.severity,
            status=Status.error,
            reason=f"not run: the check suite ended early (exit {rc}) {tail}".strip(),
            fix="see artifacts/validate/pytest.log in the run directory",
        )
        for n in names
        for d in defs
        if (n, d.id) not in seen
    ]


def _failing(r: CheckResult) -> bool:
    return r.severity is Severity.error and r.status in (Status.failed, Status.error)


def _nodes(
    tgts: list[Target], gathered: dict, results: list[CheckResult], *, guest_run: bool
) -> dict[str, Any]:
    """Per node: reachable (None when no guest check ran), counts, passed/failed."""
    out: dict[str, Any] = {}
    by_node: dict[str, list[CheckResult]] = {}
    for r in results:
        by_node.setdefault(r.node, []).append(r)
    for t in tgts:
        node = t.expect.node
        mine = by_node.get(node, [])
        ev = gathered.get(node, {})
        reachable = bool(ev.get("reachable")) if guest_run else None
        bad = any(_failing(r) for r in mine) or reachable is False
        out[node] = {
            "address": t.expect.address,
            "target": t.hostspec,
            "reachable": reachable,
            "error": ev.get("error", "") or ("no answer" if guest_run and not ev else ""),
            "gather_seconds": ev.get("seconds"),
            "counts": dict(Counter(r.status.value for r in mine)),
            "versions": _versions(mine),
            "status": "failed" if bad else "passed",
        }
    return out


def _versions(results: list[CheckResult]) -> dict[str, str]:
    """The node's versions its checks observed (rackcert.core.check_components), the GPU
    count and the kernel."""
    out: dict[str, str] = {}
    for r in results:
        key = CHECK_COMPONENTS.get(r.id)
        if key and r.observed and r.status in (Status.passed, Status.failed):
            out[key] = r.observed
        if r.id == "gpu.count" and r.observed[:1].isdigit():
            out["gpu_count"] = r.observed.split()[0]
        if r.id == "node.reachable" and r.status is Status.passed:
            parts = r.observed.split()
            if len(parts) > 1:
                out["kernel"] = parts[1]
    return out


def _summary(results: list[CheckResult], seconds: float) -> dict[str, Any]:
    """Counts that add up to total: a failing check of severity warning or info is a
    warning, never counted as failed (it does not fail the run)."""
    failing = [r for r in results if _failing(r)]
    bad = (Status.failed, Status.error)
    return {
        "total": len(results),
        "passed": sum(r.status is Status.passed for r in results),
        "failed": sum(r.status is Status.failed and r.severity is Severity.error for r in results),
        "errors": sum(r.status is Status.error and r.severity is Severity.error for r in results),
        "warnings": sum(r.status in bad and r.severity is not Severity.error for r in results),
        "skipped": sum(r.status is Status.skipped for r in results),
        "error_failures": len(failing),
        "failing": sorted({f"{r.node}:{r.id}" for r in failing}),
        "ok": not failing,
        "wall_seconds": round(seconds, 3),
    }
