"""What a guest check needs to know of its ESXi host's software, from the recorded discovery.

A vGPU guest's driver must come from the release branch of the NVIDIA vGPU manager its host
runs (NVIDIA's vGPU release notes for VMware vSphere, "Compatibility Requirements for the
NVIDIA vGPU Manager and Guest VM Driver"). The spec names the guest's driver; only the host
says which manager it runs, through esxcli `software vib list`, which provision's discovery
records (`rackcert.core.observed.EsxcliHost`). This module hands that record to the guest checks
in their `NodeExpect`, so `gpu.vgpu.branch` judges evidence on record and never asks vCenter.

    >>> found = discovery_record(rack, run, runs_root)      # validation.hypervisor_results
    >>> targets = with_vgpu_managers(targets, spec, found[0] if found else None)
"""

from __future__ import annotations

from rackcert.core.observed import Inventory
from rackcert.core.spec import Spec
from validation.expect import VgpuManager
from validation.gather import Target


def vgpu_manager(spec: Spec, inventory: Inventory, host_name: str) -> VgpuManager | None:
    """The manager on the spec's host `host_name` as discovery saw it; None: not asked.

    A host discovery did not ask through esxcli (or did not find) says nothing: None. A host
    that did not answer is `answered` False with why, never taken as running a manager.
    """
    spec_host = spec.host(host_name)
    # vCenter names a host by the address it was added with (as the planner matches it).
    observed = inventory.host(spec_host.address) or inventory.host(spec_host.name)
    if observed is None or observed.esxcli is None:
        return None
    facts = observed.esxcli
    if not facts.answered:
        return VgpuManager(host=host_name, why=facts.error or "no esxcli answer")
    vib = facts.vgpu_manager()
    return VgpuManager(host=host_name, answered=True, version=vib.version if vib else "")


def with_vgpu_managers(
    targets: list[Target], spec: Spec, inventory: Inventory | None
) -> list[Target]:
    """The targets, each vGPU VM's expectation carrying its host's vGPU manager."""
    if inventory is None:
        return targets
    out = []
    for t in targets:
        if not t.expect.vgpu or t.expect.host is None:
            out.append(t)
            continue
        manager = vgpu_manager(spec, inventory, t.expect.host)
        expect = t.expect.model_copy(update={"vgpu_manager": manager})
        out.append(t.model_copy(update={"expect": expect}))
    return out
