"""The VM devices rackcert computes from the spec: passthrough devices, NIC ports, conflicts.

Pure functions for the planner (what the VM must look like). The extraConfig
rules (MMIO window, P2P, NUMA) live in `rackcert.core.vsphere_rules`, where the
hypervisor checks read them too.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from rackcert.core.observed import Inventory, PassthroughDevice
from rackcert.core.placement import VmPlacement
from rackcert.core.spec import GpuMode, NicMode, Spec, VmTemplate


@dataclass(frozen=True)
class DeviceWant:
    """One VirtualPCIPassthrough the VM must have."""

    backing: str  # fixed or vgpu
    id: str | None = None  # host PCI address (fixed)
    vgpu: str | None = None  # vGPU profile (vgpu)
    role: str = "gpu"  # gpu or nic

    def key(self) -> tuple[str, str]:
        return (self.backing, self.id or self.vgpu or "")


def present_key(dev: PassthroughDevice) -> tuple[str, str]:
    """A device the VM holds, keyed as `DeviceWant.key` keys the one it should hold."""
    return (dev.backing, (dev.id if dev.backing == "fixed" else dev.vgpu) or "")


def device_diff(
    wanted: list[DeviceWant], present: list[PassthroughDevice]
) -> tuple[list[DeviceWant], list[PassthroughDevice]]:
    """(to add, to remove) so the VM holds exactly `wanted`, counted as a multiset.

    Keys are not unique: a VM of two vGPUs of one profile holds two devices of one key
    (NVIDIA vGPU for vSphere: several vGPUs of one full-GPU profile per VM), so a set
    would see one and plan nothing when a second is missing. Counting keeps each copy.
    Of surplus copies the ones added last (highest device key) are removed.

        >>> vgpu = DeviceWant("vgpu", vgpu="grid_a100d-40c")
        >>> held = PassthroughDevice(key=13000, backing="vgpu", vgpu="grid_a100d-40c")
        >>> device_diff([vgpu, vgpu], [held]) == ([vgpu], [])
        True
    """
    want = Counter(d.key() for d in wanted)
    have = Counter(present_key(d) for d in present)
    missing, surplus = want - have, have - want
    add: list[DeviceWant] = []
    for d in wanted:
        if missing[d.key()] > 0:
            missing[d.key()] -= 1
            add.append(d)
    remove: list[PassthroughDevice] = []
    for dev in sorted(present, key=lambda d: d.key, reverse=True):
        if surplus[present_key(dev)] > 0:
            surplus[present_key(dev)] -= 1
            remove.append(dev)
    return add, sorted(remove, key=lambda d: d.key)


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
