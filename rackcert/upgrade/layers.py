"""Which layers an upgrade changes: the new spec against the last certified run's spec.

Two layers. The host image: ESXi's base version (hosts[].esxi_version), the vGPU manager
(host_software.vgpu_manager_version) and the other image components (host_software
.components, e.g. nmlx5). The guest: the NVIDIA driver, CUDA, OFED/DOCA, the container
toolkit, NCCL (guest.*). Anything else that differs (hosts, VMs, templates) is not an
upgrade but a re-provision, and is refused by refusals.py.

    changes = diff(certified_spec, new_spec)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rackcert.core.spec import Spec

GUEST_COMPONENTS = ("nvidia_driver", "cuda", "ofed", "container_toolkit", "nccl")
ESXI = "esxi"
VGPU_MANAGER = "vgpu_manager"

Layer = Literal["host", "guest"]


@dataclass(frozen=True)
class Change:
    """One component that moves: on these hosts (host layer) or every node (guest layer)."""

    layer: Layer
    component: str
    before: str | None
    after: str | None
    hosts: tuple[str, ...] = ()

    def line(self) -> str:
        where = f" on {', '.join(self.hosts)}" if self.hosts else ""
        return f"{self.layer}: {self.component} {self.before or '-'} -> {self.after or '-'}{where}"


def host_versions(spec: Spec, host: str) -> dict[str, str]:
    """The host image the spec asks of one host: esxi, the vGPU manager, components."""
    out = {ESXI: spec.host(host).esxi_version}
    if spec.host_software.vgpu_manager_version:
        out[VGPU_MANAGER] = spec.host_software.vgpu_manager_version
    out.update(spec.host_software.components)
    return out


def guest_versions(spec: Spec) -> dict[str, str]:
    """The guest components the spec pins (component -> version)."""
    out: dict[str, str] = {}
    for name in GUEST_COMPONENTS:
        value = getattr(spec.guest, name)
        if value:
            out[name] = str(value)
    return out


def diff(before: Spec, after: Spec) -> list[Change]:
    """Every component that differs, host layer first (in host order), then the guest's."""
    out: list[Change] = []
    names = [h.name for h in after.hosts if h.name in {b.name for b in before.hosts}]
    per_component: dict[tuple[str, str | None, str | None], list[str]] = {}
    for host in names:
        old, new = host_versions(before, host), host_versions(after, host)
        for comp in [*new, *(k for k in old if k not in new)]:
            if old.get(comp) != new.get(comp):
                per_component.setdefault((comp, old.get(comp), new.get(comp)), []).append(host)
    for (comp, old_v, new_v), hosts in per_component.items():
        out.append(Change("host", comp, old_v, new_v, tuple(hosts)))
    old_g, new_g = guest_versions(before), guest_versions(after)
    for comp in GUEST_COMPONENTS:
        if old_g.get(comp) != new_g.get(comp):
            out.append(Change("guest", comp, old_g.get(comp), new_g.get(comp)))
    return out


def uses_vgpu(spec: Spec) -> bool:
    """Any VM of the rack takes vGPUs (then the host's manager must lead the guest driver)."""
    used = {vm.template for vm in spec.vms}
    return any(t.gpu_mode.value == "vgpu" for t in spec.vm_templates if t.name in used)
