"""The node itself: reachable over SSH at all. Every other check needs this one."""

from __future__ import annotations

from validation.checks import NodeView, Outcome, check, passed


@check("node.reachable", probes=("hostname",))
def reachable(view: NodeView) -> Outcome:
    """rackcert reaches the node over SSH with the spec's user and key and runs a command.

    Fix: check the VM is powered on, the address/port in the spec, and guest.ssh.key_file.
    """
    lines = view.text("hostname").splitlines()
    return passed(" ".join(lines[:2]), f"{view.expect.user}@{view.expect.address}")
