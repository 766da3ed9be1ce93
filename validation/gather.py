"""Asking one node its probes over testinfra: one script, one SSH session, per node.

`Target` says how to reach a node (a rackcert.ssh_target.SshTarget, rendered as
testinfra's host spec; none for this machine) and what it must be; `gather` runs the
probe script there (the checks' probes and, when asked, the facts' ones) and returns
the outputs, or the reason the node could not be reached. A node that cannot be
reached is an answer (`reachable=False`), never an exception.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from rackcert.ssh_target import SshTarget
from validation.expect import NodeExpect
from validation.probes import PROBES, Probe, ProbeOutput, build_script, split_output


class Target(BaseModel):
    expect: NodeExpect
    ssh: SshTarget | None = Field(None, description="How to reach the node; none: this machine")

    @property
    def hostspec(self) -> str:
        """testinfra's name for the target: local:// or ssh://user@addr:port."""
        return self.ssh.testinfra()[0] if self.ssh else "local://"


class Job(BaseModel):
    """What the pytest process is asked to do; written by the runner as JSON."""

    targets: list[Target]
    checks: list[str]
    tool_path: str | None = Field(None, description="PATH prefix on the nodes; {node} expands")
    events: str = Field(description="JSON-lines file the plugin appends results to")
    facts: str | None = Field(
        None, description="Write facts.json here, from the same probe session (validation.facts)"
    )


@dataclass
class Gathered:
    node: str
    reachable: bool
    outputs: dict[str, ProbeOutput] = field(default_factory=dict)
    error: str = ""
    seconds: float = 0.0


def testinfra_host(target: Target):  # -> testinfra.host.Host (imported lazily)
    """The testinfra Host for a target; cached by testinfra, so one per node per process."""
    import testinfra

    if target.ssh is None:
        return testinfra.get_host("local://")
    hostspec, kwargs = target.ssh.testinfra()
    return testinfra.get_host(hostspec, **kwargs)


def _ssh_error(exc: BaseException) -> str:
    result = exc.args[0] if exc.args else None
    stderr = getattr(result, "stderr", None)
    text = stderr if isinstance(stderr, str) and stderr.strip() else str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return (lines[-1] if lines else "ssh failed")[:300]


def gather(
    target: Target, probe_names: list[str], tool_path: str | None, extra: Sequence[Probe] = ()
) -> Gathered:
    """Run the probes (by name, plus `extra`: the facts') on one node, in one script over
    one SSH session; never raises."""
    node = target.expect.node
    start = time.monotonic()
    probes = [*(PROBES[n] for n in probe_names), *extra]
    path = tool_path.replace("{node}", node) if tool_path else None
    script = build_script(probes, target.expect, path)
    try:
        result = testinfra_host(target).run(script)
    except Exception as exc:  # noqa: BLE001 - ssh exit 255 arrives as RuntimeError
        return Gathered(node, False, error=_ssh_error(exc), seconds=time.monotonic() - start)
    outputs = split_output(result.stdout)
    if "hostname" not in outputs:
        err = (result.stderr or result.stdout or f"exit {result.rc}").strip().splitlines()
        reason = err[-1][:300] if err else f"exit {result.rc}"
        return Gathered(node, False, error=f"no answer from the node's shell: {reason}")
    return Gathered(node, True, outputs, seconds=time.monotonic() - start)
