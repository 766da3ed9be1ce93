"""The VM settings rackcert computes from the spec: MMIO window, P2P, NUMA, devices.

Pure functions, shared by the planner (what the VM must look like) and the
tests. Values are the strings vSphere stores in extraConfig.
"""

from __future__ import annotations

from dataclasses import dataclass

from rackcert.observed import Inventory
from rackcert.placement import VmPlacement
from rackcert.spec import GpuMode, HardwareProfile, NicMode, Spec, VmTemplate

MMIO_ENABLE = "pciPassthru.use64bitMMIO"
MMIO_SIZE = "pciPassthru.64bitMMIOSizeGB"
ALLOW_P2P = "pciPassthru.allowP2P"
RELAX_ACS = "pciPassthru.RelaxACSforP2P"
NUMA_AFFINITY = "numa.nodeAffinity"


def next_power_of_two(value: int) -> int:
    return 1 if value <= 1 else 1 << (value - 1).bit_length()


def mmio_size_gb(gpu_memory_gb: list[int], override: int | None = None) -> int:
    """pciPassthru.64bitMMIOSizeGB: total GPU memory rounded up to a power of two, doubled.

    VMware/NVIDIA guidance for large-BAR GPUs (DESIGN.md, Provision): 1 x A100
    80GB -> 256, 2 x 80GB -> 512, 2 x 40GB -> 256. The template may override it.
    """
    if override:
        return override
    total = sum(gpu_memory_gb)
    return 2 * next_power_of_two(total) if total else 0


@dataclass(frozen=True)
class DeviceWant:
    """One VirtualPCIPassthrough the VM must have."""

    backing: str  # fixed or vgpu
    id: str | None = None  # host PCI address (fixed)
    vgpu: str | None = None  # vGPU profile (vgpu)
    role: str = "gpu"  # gpu or nic

    def key(self) -> tuple[str, str]:
        return (self.backing, self.id or self.vgpu or "")


def nic_ports(
    placements: list[VmPlacement], templates: dict[str, VmTemplate], host: str
) -> dict[str, str]:
    """VM name -> the NIC PCI function it gets in passthrough, for one host.

    It is exactly `VmPlacement.nic`, the spine's answer, so that provision and
    validation's hypervisor checks agree on it. VMs of one host that share a NIC
    function can be configured but run one at a time (vSphere refuses to power
    on a second VM holding the same passthrough device).
    """
    return {
        p.vm: p.nic
        for p in placements
        if p.host == host and p.nic and templates[p.vm].nic is NicMode.passthrough
    }


def wanted_devices(
    tmpl: VmTemplate, placement: VmPlacement, nic_port: str | None
) -> list[DeviceWant]:
    if tmpl.gpu_mode is GpuMode.vgpu:
        devices = [DeviceWant("vgpu", vgpu=tmpl.vgpu_profile) for _ in placement.gpus]
    else:
        devices = [DeviceWant("fixed", id=pci) for pci in placement.gpus]
    if nic_port:
        devices.append(DeviceWant("fixed", id=nic_port, role="nic"))
    return devices


def wanted_extra_config(
    tmpl: VmTemplate, placement: VmPlacement, profile: HardwareProfile
) -> dict[str, str]:
    """extraConfig keys rackcert owns for this VM, with their values."""
    memory = {g.pci: g.memory_gb for g in profile.gpus}
    out: dict[str, str] = {}
    gpus = list(placement.gpus)
    if gpus and tmpl.gpu_mode is GpuMode.passthrough:
        out[MMIO_ENABLE] = "TRUE"
        out[MMIO_SIZE] = str(mmio_size_gb([memory[g] for g in gpus], tmpl.mmio_size_gb))
    if len(gpus) >= 2:
        out[ALLOW_P2P] = "true"
        out[RELAX_ACS] = "true"
        if tmpl.gpu_mode is GpuMode.vgpu:
            # NVLink P2P between vGPUs on A100 needs unified memory off (DESIGN.md, Provision).
            for n in range(len(gpus)):
                out[f"pciPassthru{n}.cfg.enable_uvm"] = "0"
    if tmpl.numa_affinity and placement.numa is not None and gpus:
        out[NUMA_AFFINITY] = str(placement.numa)
    return out


def power_conflicts(
    spec: Spec, placements: list[VmPlacement], inventory: Inventory
) -> dict[str, tuple[str, str]]:
    """VM -> (PCI id, holder): spec VMs that cannot run because another VM holds a device.

    vSphere powers on one VM per fixed passthrough device at a time (DirectPath I/O:
    a device is owned by one running VM). Holders are the VMs running now, then
    the spec's VMs in order; a later VM that needs a held device stays off. This
    is how the seed's alternative setups (two 1-GPU VMs sharing a NIC port) look.
    """
    templates = {v.name: spec.template(v.template) for v in spec.vms}
    wanted: dict[str, tuple[str, set[str]]] = {}
    for spec_host in spec.hosts:
        ports = nic_ports(placements, templates, spec_host.name)
        for p in placements:
            if p.host != spec_host.name:
                continue
            tmpl = templates[p.vm]
            ids = {d.id for d in wanted_devices(tmpl, p, ports.get(p.vm)) if d.id}
            wanted[p.vm] = (spec_host.name, ids)
    held: dict[tuple[str, str], str] = {}
    address = {h.name: h.address for h in spec.hosts}
    for vm in inventory.vms:
        if vm.power_state != "poweredOn":
            continue
        host = next((n for n, a in address.items() if a == vm.host or n == vm.host), vm.host)
        for dev in vm.passthrough:
            if dev.id:
                held.setdefault((host or "", dev.id), vm.name)
    out: dict[str, tuple[str, str]] = {}
    for vm_spec in spec.vms:
        host, ids = wanted[vm_spec.name]
        clash = sorted(
            (pci, held[(host, pci)])
            for pci in ids
            if held.get((host, pci), vm_spec.name) != vm_spec.name
        )
        if clash:
            out[vm_spec.name] = clash[0]
            continue
        for pci in ids:
            held[(host, pci)] = vm_spec.name
    return out
