"""The node itself: reachable over SSH (every other check needs this one), running what it has."""

from __future__ import annotations

from validation.checks import NodeView, Outcome, check, failed, passed
from validation.facts.system import Hostname, KernelVersion, RunningVersions


@check("node.reachable", facts=(Hostname, KernelVersion))
def reachable(view: NodeView) -> Outcome:
    """rackcert reaches the node over SSH with the spec's user and key and runs a command.

    Fix: check the VM is powered on, the address/port in the spec, and guest.ssh.key_file.
    """
    name = view.fact(Hostname)
    out = view.output(KernelVersion)
    kernel = out.text.strip() if out is not None and out.ok else ""
    return passed(f"{name} {kernel}".strip(), f"{view.expect.user}@{view.expect.address}")


@check("node.reboot_pending", facts=(RunningVersions,))
def reboot_pending(view: NodeView) -> Outcome:
    """The loaded NVIDIA driver and OFED are the installed ones; no role left a reboot pending.

    Fix: reboot the node (drain it first), or run rackcert configure again, which reboots it.
    """
    seen = view.fact(RunningVersions)
    problems = [
        f"{what} loaded {seen[f'{key}_loaded'][0]}, installed {seen[f'{key}_installed'][0]}"
        for key, what in (("nvidia", "NVIDIA driver"), ("mlx5", "OFED mlx5_core"))
        if seen.get(f"{key}_loaded")
        and seen.get(f"{key}_installed")
        and seen[f"{key}_loaded"][0] != seen[f"{key}_installed"][0]
    ]
    problems += [f"pending: {reason}" for reason in seen.get("reboot", [])]
    if problems:
        return failed("; ".join(problems), "loaded = installed", "a reboot is pending")
    loaded = ", ".join(
        f"{what} {seen[key][0]}"
        for key, what in (("nvidia_loaded", "NVIDIA driver"), ("mlx5_loaded", "mlx5_core"))
        if seen.get(key)
    )
    return passed(loaded or "no NVIDIA or OFED module loaded", "loaded = installed")
