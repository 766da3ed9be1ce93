"""vGPU checks that judge a guest against its host: the driver branch pair NVIDIA requires.

NVIDIA's vGPU release notes for VMware vSphere ("Compatibility Requirements for the NVIDIA
vGPU Manager and Guest VM Driver"): with an incompatible guest driver the vGPU fails to load.
Each vGPU release ships a Virtual GPU Manager and guest drivers of one branch (vGPU 16.x:
R535; 17.x: R550), and configure installs the guest driver of the host manager's branch, so
the certified pair is one branch on both sides. NVIDIA also lets a newer manager branch run
guests of the branch before it; rackcert does not certify that mix, it reports it.

The host's manager version comes from the recorded discovery (esxcli `software vib list`,
through `validation.host_software` into `NodeExpect.vgpu_manager`); the guest's from
`nvidia-smi -q`.
"""

from __future__ import annotations

from rackcert.core.results import Status
from validation.checks import NodeView, Outcome, check, failed, passed, skipped
from validation.checks.match import driver_branch as branch
from validation.facts.gpu import SmiHeader


@check("gpu.vgpu.branch", facts=(SmiHeader,))
def vgpu_branch(view: NodeView) -> Outcome:
    """The guest's NVIDIA driver is of the release branch of its host's vGPU manager VIB.

    Fix: install the guest driver of the host manager's branch (guest.nvidia_driver; configure).
    """
    if not view.expect.vgpu:
        return skipped("the VM's GPUs are not vGPUs", "no vGPU manager involved")
    manager = view.expect.vgpu_manager
    if manager is None:
        return skipped(
            "no recorded discovery asked the VM's host through esxcli: run rackcert plan",
            "guest branch = host manager branch",
        )
    guest = view.fact(SmiHeader).driver_version
    observed = f"guest {guest} ({branch(guest) or '?'})"
    if not manager.answered:
        return Outcome(
            Status.error,
            f"{observed}, host {manager.host} unknown",
            "the host's vGPU manager branch",
            f"host {manager.host} did not answer esxcli: {manager.why}",
        )
    if not manager.version:
        return failed(
            f"{observed}, host {manager.host}: no NVIDIA vGPU manager VIB",
            "a vGPU manager VIB on the host",
            "esxcli software vib list shows no NVD driver VIB",
        )
    host = branch(manager.version)
    observed += f", host {manager.host} manager {manager.version} ({host or '?'})"
    expected = f"guest driver of branch {host or '?'}"
    if not host or branch(guest) != host:
        return failed(observed, expected, "guest driver and host vGPU manager branches differ")
    return passed(observed, expected)
