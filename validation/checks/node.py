"""The node itself: reachable over SSH at all. Every other check needs this one."""

from __future__ import annotations

from validation.checks import NodeView, Outcome, check, passed
from validation.facts.system import Hostname, KernelVersion


@check("node.reachable", facts=(Hostname, KernelVersion))
def reachable(view: NodeView) -> Outcome:
    """rackcert reaches the node over SSH with the spec's user and key and runs a command.

    Fix: check the VM is powered on, the address/port in the spec, and guest.ssh.key_file.
    """
    name = view.fact(Hostname)
    out = view.output(KernelVersion)
    kernel = out.text.strip() if out is not None and out.ok else ""
    return passed(f"{name} {kernel}".strip(), f"{view.expect.user}@{view.expect.address}")
