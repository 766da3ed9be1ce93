"""Asking one node its probes over testinfra: one script, one SSH session, per node.

`Target` says how to reach a node (a rackcert.core.ssh_target.SshTarget, rendered as
testinfra's host spec; none for this machine) and what it must be; `gather` runs the
probe script there (the commands of the fact classes the checks read, and of the
report's snapshot when asked) and returns the outputs, or the reason the node could
not be reached. A node that cannot be
reached is an answer (`reachable=False`), never an exception.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, Field
from pyinfra.api import FactBase

from rackcert.core.ssh_target import SshTarget
from validation.expect import NodeExpect
from validation.probes import ProbeOutput, build_script, split_output


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
        None, description="Write facts.json here, from the same probe session (validation.snapshot)"
    )
    snapshot: bool = Field(
        True, description="Gather the report's snapshot facts too (validation.facts.snapshot)"
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
    if target.ssh.ssh_config is None:  # the caller's own ssh_config decides otherwise
        kwargs["ssh_extra_args"] = f"{kwargs.get('ssh_extra_args', '')} -o KexAlgorithms={KEX}"
    return testinfra.get_host(hostspec, **kwargs)


# The probe session prefers curve25519 key exchange: OpenSSH 9's default, the
# post-quantum hybrid sntrup761x25519, costs the controller about 100 ms of CPU per
# connection against 10 ms (OpenSSH 9.2 on a 2-core machine; benchmarks/validate_fanout.py),
# which alone would be twice validate's whole budget per node. The hybrid stays allowed
# for a node that offers nothing else. The session carries node facts, no secret.
KEX = (
    "curve25519-sha256,curve25519-sha256@libssh.org,sntrup761x25519-sha512@openssh.com,"
    "ecdh-sha2-nistp256,ecdh-sha2-nistp384,ecdh-sha2-nistp521"
)


def _ssh_error(exc: BaseException) -> str:
    result = exc.args[0] if exc.args else None
    stderr = getattr(result, "stderr", None)
    text = stderr if isinstance(stderr, str) and stderr.strip() else str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return (lines[-1] if lines else "ssh failed")[:300]


def gather(target: Target, facts: Sequence[type[FactBase]], tool_path: str | None) -> Gathered:
    """Run the facts' commands on one node, in one script over one SSH session (the node's
    hostname is always asked: it tells the node answered); never raises."""
    from validation.facts.system import Hostname

    node = target.expect.node
    start = time.monotonic()
    asked: list[type[FactBase]] = [Hostname, *(f for f in facts if f is not Hostname)]
    path = tool_path.replace("{node}", node) if tool_path else None
    script = build_script(asked, target.expect, path)
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
