"""The Scheduler port over Slurm: the roll's questions, asked and read by rackcert.core.slurm
(scontrol to drain, resume and read nodes, squeue to count jobs; the health check and
localisation's drain ask through the same module).

    slurm = SlurmScheduler({"SLURM_CONF": "/etc/slurm/slurm.conf"})
    slurm.drain("node1", "rackcert upgrade 20261206T...")
"""

from __future__ import annotations

import os

from rackcert.core.slurm import client
from rackcert.core.slurm.client import SlurmError, SlurmNode
from rackcert.upgrade.ports import NodeState, PortError


def node_state(node: SlurmNode) -> NodeState:
    """Slurm's node as the roll's NodeState; jobs is 1 for a node that holds any (Slurm's
    own state), to be replaced by squeue's count where asked."""
    return NodeState(
        name=node.name,
        base=node.base,
        drain=node.drain,
        jobs=1 if node.busy else 0,
        reason=node.reason,
        partitions=node.partitions,
    )


def parse_nodes(text: str) -> dict[str, NodeState]:
    """`scontrol show node -o` (one line per node) as NodeStates."""
    return {name: node_state(n) for name, n in client.parse_nodes(text).items()}


class SlurmScheduler:
    kind = "slurm"

    def __init__(self, env: dict[str, str] | None = None, *, timeout: float = 15.0):
        self.conf = (env or {}).get("SLURM_CONF") or os.environ.get("SLURM_CONF")
        self.timeout = timeout

    def nodes(self, names: list[str]) -> dict[str, NodeState]:
        try:
            seen = client.show_nodes(conf=self.conf, timeout=self.timeout)
        except SlurmError as exc:
            raise PortError(str(exc)) from None
        out = {}
        for name in names:
            found = seen.get(name)
            out[name] = (
                node_state(found)
                if found is not None
                else NodeState(name, base="DOWN", reason="not a node of Slurm (scontrol show node)")
            )
        return out

    def jobs(self, node: str) -> int:
        """Jobs running or completing on the node (squeue -w)."""
        try:
            return client.jobs_on(node, conf=self.conf, timeout=self.timeout)
        except SlurmError as exc:
            raise PortError(str(exc)) from None

    def drain(self, node: str, reason: str) -> None:
        try:
            client.drain(node, reason, conf=self.conf, timeout=self.timeout)
        except SlurmError as exc:
            raise PortError(str(exc)) from None

    def resume(self, node: str) -> None:
        try:
            client.resume(node, conf=self.conf, timeout=self.timeout)
        except SlurmError as exc:
            raise PortError(str(exc)) from None

    def set_reason(self, node: str, reason: str) -> None:
        self.drain(node, reason)
