"""Schedulers for sites without Slurm: the spec's hook commands, or a person asked.

The hooks (spec `upgrade.hooks`) are argv lists run without a shell, `{node}` and
`{reason}` replaced: drain_command, jobs_command (prints the node's running job count),
resume_command. With no hooks the roll asks before it takes each node out, and trusts
the answer that the node runs no job; `--plan` says so.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable

from rackcert.core.spec import UpgradeHooks
from rackcert.upgrade.ports import NodeState, PortError, drain_reason


class HookScheduler:
    """The site's own commands; this roll's drains are remembered here (the site's tool
    has no reason field rackcert can read back)."""

    kind = "hooks"

    def __init__(self, hooks: UpgradeHooks, run: str, *, timeout: float = 60.0):
        self.hooks, self.run, self.timeout = hooks, run, timeout
        self.drained: dict[str, str] = {}

    def _call(self, argv: list[str], node: str, reason: str = "") -> str:
        args = [a.replace("{node}", node).replace("{reason}", reason) for a in argv]
        try:
            proc = subprocess.run(
                args, capture_output=True, text=True, timeout=self.timeout, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PortError(f"upgrade hook {args[0]} for {node}: {exc}") from None
        if proc.returncode != 0:
            err = " ".join((proc.stderr or proc.stdout).split())[:200]
            raise PortError(f"upgrade hook {args[0]} for {node}: exit {proc.returncode}: {err}")
        return proc.stdout

    def nodes(self, names: list[str]) -> dict[str, NodeState]:
        out = {}
        for name in names:
            text = self._call(self.hooks.jobs_command, name).strip()
            try:
                jobs = int(text.split()[0]) if text else 0
            except ValueError:
                raise PortError(
                    f"upgrade hook jobs_command for {name} printed {text[:40]!r}, not a count"
                ) from None
            reason = self.drained.get(name, "")
            out[name] = NodeState(name, "MIXED" if jobs else "IDLE", bool(reason), jobs, reason)
        return out

    def drain(self, node: str, reason: str) -> None:
        self._call(self.hooks.drain_command, node, reason)
        self.drained[node] = reason

    def resume(self, node: str) -> None:
        self._call(self.hooks.resume_command, node)
        self.drained.pop(node, None)

    def set_reason(self, node: str, reason: str) -> None:
        self.drain(node, reason)


class AskScheduler:
    """No scheduler known: ask before taking each node out; the answer is the drain."""

    kind = "ask"

    def __init__(self, run: str, ask: Callable[[str], bool]):
        self.run, self.ask = run, ask
        self.drained: dict[str, str] = {}

    def nodes(self, names: list[str]) -> dict[str, NodeState]:
        return {
            n: NodeState(n, "IDLE", n in self.drained, 0, self.drained.get(n, "")) for n in names
        }

    def drain(self, node: str, reason: str) -> None:
        if node in self.drained:
            self.drained[node] = reason
            return
        if not self.ask(f"Take {node} out of service now (no job may be running on it)?"):
            raise PortError(f"{node}: not taken out: the operator said no")
        self.drained[node] = reason

    def resume(self, node: str) -> None:
        self.drained.pop(node, None)

    def set_reason(self, node: str, reason: str) -> None:
        self.drained[node] = reason or drain_reason(self.run)
