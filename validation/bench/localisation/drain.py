"""`rackcert bench --drain`: take out of Slurm the nodes the localisation verdict names.

Why: the verdict says which node holds the rack back (its NIC, its PCIe slot, its compute,
one of its GPUs); on a Slurm site the next job must not land there. So each node a node or
GPU finding names is drained with the reason `rackcert: <finding>` (sinfo -R shows it). A
link finding names a cable between two nodes, not a node: neither end is drained (the
report and the verdict name the cable for the people who swap it).

Only rackcert's own drains are ever touched, the way the health check does it
(validation.healthcheck): a node drained by someone else (an operator's reason, or the
health check's own drain, which this record does not hold) stays as it is. A later
`--drain` run that finds a node clean resumes it only when this rack's drain record says
bench drained it with exactly the reason Slurm still shows. The record is
`<runs root>/<rack>/slurm-drains.jsonl`, one JSON line per drain and resume.

    actions = drain_named(localisation, record=path, env={"SLURM_CONF": conf})
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from rackcert.core.errors import InputError
from rackcert.core.localisation import Finding, Localisation
from rackcert.core.slurm import client as slurm
from rackcert.core.slurm.client import SlurmError
from validation.healthcheck import REASON_PREFIX, append_record

RECORD_NAME = "slurm-drains.jsonl"
REASON_MAX = 200  # sinfo -R shows the start; scontrol keeps the whole line


@dataclass(frozen=True)
class DrainAction:
    """What --drain did to one node: drain | resume | kept-operator-drain | kept-own-drain."""

    node: str
    action: str
    reason: str


def reason_for(findings: list[Finding]) -> str:
    """`rackcert: <finding>`: the first finding's own line, one line, capped."""
    first = findings[0]
    text = " ".join((first.message or first.check or first.subject).split())
    if first.check and not text.startswith(first.check):
        text = f"{first.check}: {text}"
    more = f" (+{len(findings) - 1} more)" if len(findings) > 1 else ""
    return f"{REASON_PREFIX} {text}"[:REASON_MAX] + more


def last_own_drains(record: Path) -> dict[str, str]:
    """Node -> the reason of bench's last drain of it, for nodes not resumed since."""
    own: dict[str, str] = {}
    try:
        lines = record.read_text().splitlines()
    except OSError:
        return own
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("node"), str):
            continue
        if entry.get("action") == "drain" and isinstance(entry.get("reason"), str):
            own[entry["node"]] = entry["reason"]
        elif entry.get("action") == "resume":
            own.pop(entry["node"], None)
    return own


def _update(node: str, env: dict[str, str], reason: str | None) -> None:
    """Drain the node with `reason`, or resume it (None), through rackcert.core.slurm."""
    conf = env.get("SLURM_CONF")
    try:
        if reason is None:
            slurm.resume(node, conf=conf)
        else:
            slurm.drain(node, reason, conf=conf)
    except SlurmError as exc:
        what = "resume" if reason is None else "drain"
        raise InputError(f"--drain: could not {what} {node}: {exc}") from None


def drain_named(
    loc: Localisation, *, record: Path, env: dict[str, str], run: str = ""
) -> list[DrainAction]:
    """Drain every node a finding names, resume every clean node bench drained; record both.

    Raises InputError when slurmctld refuses (the drains done before stay recorded)."""
    own = last_own_drains(record)
    named = loc.named_nodes()
    actions: list[DrainAction] = []
    for node in loc.names():
        try:
            seen = slurm.show_node(node, conf=env.get("SLURM_CONF"))
        except SlurmError as exc:
            raise InputError(f"--drain: {exc}") from None
        drained, current = seen.drain, seen.reason
        ours = drained and current.startswith(REASON_PREFIX) and own.get(node) == current
        if node in named:
            reason = reason_for(named[node])
            if drained and not ours:
                actions.append(DrainAction(node, "kept-operator-drain", current))
                continue
            if ours and current == reason:
                actions.append(DrainAction(node, "kept-own-drain", current))
                continue
            _update(node, env, reason)
            action = DrainAction(node, "drain", reason)
        elif ours:
            _update(node, env, None)
            action = DrainAction(node, "resume", current)
        else:
            if drained:
                actions.append(DrainAction(node, "kept-operator-drain", current))
            continue
        actions.append(action)
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        append_record(record, {"time": stamp, "run": run, **asdict(action)})
    return actions
