"""The vendor device group a placed VM takes, if any: what plan shows and provision builds.

A pure function of the spec and one placement, so the spec check, the planner and (later)
discovery describe a group the same way. Whether a VM gets a device group at all is
`rackcert.core.gpu_attach.decide` (GPU kind, vSphere release, gpu_mode); this module only names
the group: an HGX board's Fabric Manager partition, or an NVLink-bridged PCIe pair on
vSphere 8.

    >>> describe(wanted_group(spec, placement))
    'partition-1 (modules 1, 2, 3, 4): device group of 4 x vGPU grid_h200x-141c'
"""

from __future__ import annotations

from dataclasses import dataclass

from rackcert.core.gpu_attach import GpuKind, Mechanism, decide, host_line
from rackcert.core.placement import VmPlacement
from rackcert.core.spec import Spec


@dataclass(frozen=True)
class GroupWant:
    """One VM's device group: which GPUs, as which partition, through which backing."""

    vm: str
    host: str
    name: str
    partition: int | None
    modules: tuple[int, ...]
    gpus: tuple[str, ...]
    mechanism: Mechanism
    vgpu: str | None
    vendor_name: str = ""  # the name the host lists it by (RetrieveVendorDeviceGroupInfo)

    def as_params(self) -> dict[str, object]:
        """The shape plan.json records and apply reads."""
        return {
            "name": self.name,
            "vendor_name": self.vendor_name,
            "partition": self.partition,
            "modules": list(self.modules),
            "gpus": list(self.gpus),
            "backing": "vgpu" if self.mechanism is Mechanism.device_group_vgpu else "fixed",
            "vgpu": self.vgpu,
        }


def partition_group_name(board_name: str, partition: int) -> str:
    """The vendor device group name of an HGX board's Fabric Manager partition.

    What ESXi's NVIDIA GPU manager calls a partition is not documented publicly; rackcert
    and its twin use this one form, so discovery maps a group back to its partition
    (`partition_of_group`). Proven only against the twin.
    """
    return f"NVIDIA {board_name} partition-{partition}"


def pair_group_name(gpus: tuple[str, ...] | list[str]) -> str:
    """The vendor device group name of an NVLink-bridged PCIe pair (same caveat)."""
    return "NVIDIA NVLink pair " + "+".join(sorted(gpus))


def partition_of_group(name: str) -> int | None:
    """The partition ID a device group name carries (`partition_group_name`), if any."""
    head, sep, tail = name.rpartition(" partition-")
    return int(tail) if sep and head and tail.isdigit() else None


def gpu_kind(spec: Spec, placement: VmPlacement) -> GpuKind:
    """The kind of GPUs a placed VM holds: on a board, a bridged pair, or plain PCIe."""
    if spec.host_profile(placement.host).board is not None:
        return GpuKind.nvswitch
    return GpuKind.nvlink_pair if placement.nvlink_pair else GpuKind.pcie


def wanted_group(spec: Spec, placement: VmPlacement) -> GroupWant | None:
    """The device group the VM takes whole, or None when its GPUs go one by one."""
    if not placement.gpus:
        return None
    vm = next(v for v in spec.vms if v.name == placement.vm)
    tmpl = spec.template(vm.template)
    host = spec.host(placement.host)
    decision = decide(
        gpu_kind(spec, placement), host_line(spec.vcenter.version, host.esxi_version), tmpl.gpu_mode
    )
    if decision.mechanism is None or not decision.uses_device_group:
        return None
    board = spec.host_profile(placement.host).board
    if placement.partition is not None and board is not None:
        name = f"partition-{placement.partition}"
        vendor_name = partition_group_name(board.name, placement.partition)
    else:
        name = "nvlink-pair " + "+".join(placement.gpus)
        vendor_name = pair_group_name(placement.gpus)
    vgpu = tmpl.vgpu_profile if decision.mechanism is Mechanism.device_group_vgpu else None
    return GroupWant(
        vm=placement.vm,
        host=placement.host,
        name=name,
        partition=placement.partition,
        modules=placement.modules,
        gpus=placement.gpus,
        mechanism=decision.mechanism,
        vgpu=vgpu,
        vendor_name=vendor_name,
    )


def describe(group: GroupWant) -> str:
    """One phrase for plans and summaries: the group, its modules, and how it is backed."""
    what = f"{len(group.gpus)} x vGPU {group.vgpu}" if group.vgpu else "passthrough GPUs"
    modules = f" (modules {', '.join(map(str, group.modules))})" if group.modules else ""
    return f"{group.name}{modules}: device group of {what}"
