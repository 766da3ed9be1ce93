"""The Scheduler port over Slurm's own clients: scontrol to drain, resume and read nodes,
squeue to count jobs.

What Slurm says, read as Slurm documents it (scontrol(1), sinfo(1) NODE STATE CODES):
`scontrol show node -o` prints `State=<BASE>[+FLAG...]` with a `*` after a base state
the controller cannot reach; a node with the DRAIN flag and jobs left (ALLOCATED, MIXED,
COMPLETING) is DRAINING, one with none is DRAINED. `Reason=` is read as
rackcert.core.slurm.reason reads it (the health check too).

    slurm = SlurmScheduler({"SLURM_CONF": "/etc/slurm/slurm.conf"})
    slurm.drain("node1", "rackcert upgrade 20261206T...")
"""

from __future__ import annotations

import os
import re
import subprocess

from rackcert.core.slurm.client import run_client
from rackcert.core.slurm.reason import node_reason
from rackcert.upgrade.ports import NodeState, PortError

_FIELD = re.compile(r"(?:^|\s)(NodeName|State|Partitions)=(\S*)")
BUSY = ("ALLOCATED", "MIXED", "COMPLETING")


def parse_nodes(text: str) -> dict[str, NodeState]:
    """`scontrol show node -o` (one line per node) as NodeStates; jobs is 1 for a node that
    holds any (Slurm's own state), to be replaced by squeue's count where asked."""
    out: dict[str, NodeState] = {}
    for line in text.splitlines():
        fields = dict(_FIELD.findall(line))
        name = fields.get("NodeName")
        if not name:
            continue
        parts = fields.get("State", "UNKNOWN").split("+")
        base = parts[0].rstrip("*~#!%$@^-").upper() or "UNKNOWN"
        flags = {p.rstrip("*").upper() for p in parts[1:]}
        if parts[0].endswith("*") and base not in ("DOWN",):
            flags.add("NOT_RESPONDING")
        partitions = tuple(p for p in fields.get("Partitions", "").split(",") if p)
        drain = bool(flags & {"DRAIN", "DRAINING", "DRAINED"}) or base in ("DRAINED", "DRAINING")
        if base in ("DRAINED", "DRAINING"):
            base = "MIXED" if base == "DRAINING" else "IDLE"
        out[name] = NodeState(
            name=name,
            base="DOWN" if "NOT_RESPONDING" in flags and base == "IDLE" else base,
            drain=drain,
            jobs=1 if base in BUSY or "COMPLETING" in flags else 0,
            reason=node_reason(line),
            partitions=partitions,
        )
    return out


class SlurmScheduler:
    kind = "slurm"

    def __init__(self, env: dict[str, str] | None = None, *, timeout: float = 15.0):
        self.conf = (env or {}).get("SLURM_CONF") or os.environ.get("SLURM_CONF")
        self.timeout = timeout

    def _run(self, tool: str, *args: str) -> str:
        try:
            proc = run_client(tool, *args, conf=self.conf, timeout=self.timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PortError(f"{tool} {' '.join(args[:3])}: {exc}") from None
        if proc.returncode != 0:
            err = " ".join((proc.stderr or proc.stdout).split())
            raise PortError(f"{tool} {' '.join(args[:3])}: {err or f'exit {proc.returncode}'}")
        return proc.stdout

    def nodes(self, names: list[str]) -> dict[str, NodeState]:
        seen = parse_nodes(self._run("scontrol", "show", "node", "-o"))
        out = {}
        for name in names:
            out[name] = seen.get(name) or NodeState(
                name, base="DOWN", reason="not a node of Slurm (scontrol show node)"
            )
        return out

    def jobs(self, node: str) -> int:
        """Jobs running or completing on the node (squeue -w)."""
        text = self._run("squeue", "-h", "-w", node, "-t", "RUNNING,COMPLETING", "-o", "%i")
        return len([line for line in text.splitlines() if line.strip()])

    def drain(self, node: str, reason: str) -> None:
        self._run("scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}")

    def resume(self, node: str) -> None:
        self._run("scontrol", "update", f"nodename={node}", "state=resume")

    def set_reason(self, node: str, reason: str) -> None:
        self.drain(node, reason)
