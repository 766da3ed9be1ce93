"""`rackcert validate SPEC --health-check`: the node checks itself, fast, as Slurm's health check.

Why: on a Slurm site a node that fails after an upgrade must leave the pool by itself,
between jobs, without a controller. Slurm runs a HealthCheckProgram (and a prolog) as root
on the node with an empty environment (only SLURMD_NODENAME), kills it after 60 s, and a
non-zero exit alone only logs (slurm.conf(5), HealthCheckProgram): the program must drain
the node itself. So this:

- runs on the node, no SSH: the fast subset of the validate checks (GPU count and model,
  driver, XIDs, ECC, PCIe link, NVLink, peermem, IB ports, mounts), probed by one local
  shell script (validation.probes) and judged by the same check functions, within 30 s;
- exits 0 (pass) or 1 (a check of severity error failed);
- under Slurm (SLURMD_NODENAME set): a failure drains the node with the reason
  `rackcert: <check id>: <what it saw>`; a pass resumes the node only when rackcert
  drained it (its reason starts with `rackcert:` and this node's record says rackcert
  set exactly that reason), never an operator's drain;
- appends every drain and resume it made to a local JSON-lines record
  (default /var/lib/rackcert/health-check.jsonl) that `rackcert report` can include.

    outcome = run_health_check(spec, record=Path("/var/lib/rackcert/health-check.jsonl"))
    outcome.ok, outcome.action, outcome.reason
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rackcert.core.errors import InputError
from rackcert.core.results import CheckResult, Severity, Status
from rackcert.core.slurm import client as slurm
from rackcert.core.slurm.client import SLURM_PATH, SlurmError, SlurmNode
from rackcert.core.spec import Spec
from validation.checks import REGISTRY, NodeView, facts_of, load_all, run_check
from validation.expect import expectations
from validation.facts import key_of
from validation.probes import build_script, split_output

# The fast, node-local subset: what a node can say about itself in seconds.
FAST_CHECKS = (
    "gpu.count",
    "gpu.model",
    "gpu.driver",
    "gpu.xid",
    "gpu.ecc.mode",
    "gpu.ecc.errors",
    "gpu.pcie.link",
    "gpu.nvlink.active",
    "gpu.peermem",
    "rdma.ports",
    "storage.mount",
)
# Slurm kills the program at 60 s; the probes get 25 s in all, the rest is start-up.
BUDGET_S = 25.0
DEFAULT_RECORD = Path("/var/lib/rackcert/health-check.jsonl")
REASON_PREFIX = "rackcert:"


@dataclass
class HealthOutcome:
    """What the health check saw and did on one node."""

    node: str
    results: list[CheckResult]
    seconds: float
    action: str = "none"  # drain | resume | none | kept-operator-drain | kept-own-drain
    reason: str = ""
    slurm: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def failing(self) -> list[CheckResult]:
        return [
            r
            for r in self.results
            if r.severity is Severity.error and r.status in (Status.failed, Status.error)
        ]

    @property
    def ok(self) -> bool:
        return not self.failing


def node_name(spec: Spec, given: str | None, env: dict[str, str]) -> str:
    """The node being checked: SLURMD_NODENAME under Slurm, else --node, else the hostname."""
    name = env.get("SLURMD_NODENAME") or given or socket.gethostname().split(".")[0]
    names = [vm.name for vm in spec.vms]
    if name not in names:
        raise InputError(
            f"health check: node {name!r} is not a VM of spec {spec.metadata.name}"
            f" ({', '.join(names) or 'no vms'})"
        )
    return name


def probe_locally(spec: Spec, node: str, tool_path: str | None) -> tuple[list[CheckResult], float]:
    """Run the fast subset's probes here in one script, within BUDGET_S; judge them."""
    load_all()
    expect = expectations(spec)[node]
    defs = [REGISTRY[c] for c in FAST_CHECKS if c in REGISTRY]
    path = tool_path.replace("{node}", node) if tool_path else None
    script = build_script(facts_of(defs), expect, path)
    start = time.monotonic()
    try:
        proc = subprocess.run(
            ["/bin/sh", "-c", script],
            capture_output=True,
            text=True,
            timeout=BUDGET_S,
            check=False,
            env={"PATH": SLURM_PATH, "LANG": "C.UTF-8", "LC_ALL": "C"},
            stdin=subprocess.DEVNULL,
        )
        outputs = split_output(proc.stdout)
    except subprocess.TimeoutExpired as exc:
        text = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else ""
        outputs = split_output(text or "")
    seconds = time.monotonic() - start
    view = NodeView(expect, outputs)
    results = []
    for defn in defs:
        if not all(key_of(f) in outputs for f in defn.facts):
            results.append(
                CheckResult(
                    id=defn.id,
                    node=node,
                    severity=defn.severity,
                    status=Status.failed,
                    observed=f"no answer within {BUDGET_S:.0f} s",
                    expected="an answer",
                    reason=f"probe did not finish within the health check's {BUDGET_S:.0f} s",
                    fix=defn.fix,
                )
            )
            continue
        results.append(run_check(defn, view))
    return results, seconds


def reason_for(failing: list[CheckResult]) -> str:
    """`rackcert: <check id>: <what it saw>`, one line, short enough for sinfo -R."""
    first = failing[0]
    saw = " ".join((first.observed or first.reason or "failed").split())
    more = f" (+{len(failing) - 1} more)" if len(failing) > 1 else ""
    return f"{REASON_PREFIX} {first.id}: {saw}"[:200] + more


# -- Slurm (asked and read by rackcert.core.slurm, as the roll and localisation's drain do) ----
def node_state(node: str, env: dict[str, str]) -> SlurmNode:
    """The node as slurmctld has it (`scontrol show node -o`): its drain flag and reason."""
    try:
        return slurm.show_node(node, conf=env.get("SLURM_CONF"))
    except SlurmError as exc:
        raise InputError(f"health check: {exc}") from None


def _last_own_drain(record: Path, node: str) -> str | None:
    """The reason of this node's last recorded rackcert drain, unless a resume followed."""
    last: str | None = None
    try:
        lines = record.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("node") != node:
            continue
        last = entry.get("reason") if entry.get("action") == "drain" else None
    return last


def append_record(record: Path, entry: dict[str, Any]) -> None:
    record.parent.mkdir(parents=True, exist_ok=True)
    with open(record, "a") as handle:
        handle.write(json.dumps(entry, sort_keys=True) + "\n")


def act(outcome: HealthOutcome, record: Path, env: dict[str, str]) -> None:
    """Drain on failure, resume on a pass what rackcert drained; record what was done."""
    seen = node_state(outcome.node, env)
    drained, current = seen.drain, seen.reason
    ours = drained and current.startswith(REASON_PREFIX)
    ours = ours and _last_own_drain(record, outcome.node) == current
    if not outcome.ok:
        outcome.reason = reason_for(outcome.failing)
        if drained and not ours:
            outcome.action = "kept-operator-drain"
            return
        if ours and current == outcome.reason:
            outcome.action = "kept-own-drain"
            return
        try:
            slurm.drain(outcome.node, outcome.reason, conf=env.get("SLURM_CONF"))
        except SlurmError as exc:
            raise InputError(f"health check: could not drain {outcome.node}: {exc}") from None
        outcome.action = "drain"
    elif ours:
        try:
            slurm.resume(outcome.node, conf=env.get("SLURM_CONF"))
        except SlurmError as exc:
            raise InputError(f"health check: could not resume {outcome.node}: {exc}") from None
        outcome.action, outcome.reason = "resume", current
    elif drained:
        outcome.action = "kept-operator-drain"
    if outcome.action in ("drain", "resume"):
        append_record(
            record,
            {
                "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "node": outcome.node,
                "action": outcome.action,
                "reason": outcome.reason,
                "failing": [r.id for r in outcome.failing],
                "seconds": round(outcome.seconds, 2),
            },
        )


def run_health_check(
    spec: Spec,
    *,
    node: str | None = None,
    tool_path: str | None = None,
    record: Path = DEFAULT_RECORD,
    env: dict[str, str] | None = None,
) -> HealthOutcome:
    """Check this node; under Slurm (SLURMD_NODENAME) drain or resume it. Never raises for a
    failing check (that is the answer); raises InputError for bad input or a refused drain."""
    env = dict(os.environ if env is None else env)
    name = node_name(spec, node, env)
    started = time.monotonic()
    results, _probe_s = probe_locally(spec, name, tool_path)
    outcome = HealthOutcome(name, results, time.monotonic() - started)
    if env.get("SLURMD_NODENAME"):
        outcome.slurm = True
        act(outcome, record, env)
    elif not outcome.ok:
        outcome.reason = reason_for(outcome.failing)
    return outcome


def read_record(record: Path) -> list[dict[str, Any]]:
    """The drains and resumes a health-check record holds (bad lines left out)."""
    out = []
    for line in record.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("action") in ("drain", "resume"):
            out.append(entry)
    return out
