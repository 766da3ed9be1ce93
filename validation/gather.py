"""Asking one node its probes over testinfra: one script, one SSH session, per node.

`Target` says how to reach a node (a testinfra host string plus key and SSH
config) and what it must be; `gather` runs the probe script there and returns
the outputs, or the reason the node could not be reached. A node that cannot
be reached is an answer (`reachable=False`), never an exception.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from validation.expect import NodeExpect
from validation.probes import PROBES, ProbeOutput, build_script, split_output


class Target(BaseModel):
    expect: NodeExpect
    hostspec: str = Field(description="testinfra host string: local:// or ssh://user@addr:port")
    identity_file: str | None = None
    ssh_config: str | None = None


class Job(BaseModel):
    """What the pytest process is asked to do; written by the runner as JSON."""

    targets: list[Target]
    checks: list[str]
    tool_path: str | None = Field(None, description="PATH prefix on the nodes; {node} expands")
    events: str = Field(description="JSON-lines file the plugin appends results to")
    known_hosts: str | None = Field(
        None, description="The rack's known_hosts (rackcert.known_hosts), enforced strictly"
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

    if target.hostspec.startswith("local://"):
        return testinfra.get_host(target.hostspec)
    kwargs: dict[str, object] = {"timeout": 5, "controlpersist": 0}
    if target.identity_file:
        kwargs["ssh_identity_file"] = target.identity_file
    if target.ssh_config:
        kwargs["ssh_config"] = target.ssh_config
    return testinfra.get_host(target.hostspec, **kwargs)


def _ssh_error(exc: BaseException) -> str:
    result = exc.args[0] if exc.args else None
    stderr = getattr(result, "stderr", None)
    text = stderr if isinstance(stderr, str) and stderr.strip() else str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return (lines[-1] if lines else "ssh failed")[:300]


def gather(target: Target, probe_names: list[str], tool_path: str | None) -> Gathered:
    """Run the probes on one node; never raises."""
    node = target.expect.node
    start = time.monotonic()
    probes = [PROBES[n] for n in probe_names]
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
