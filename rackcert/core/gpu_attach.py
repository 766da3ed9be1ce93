"""How a VM gets its GPUs: passthrough, vGPU or a vendor device group, decided in one place.

The answer depends on two things only: the kind of GPU (a PCIe card alone, a PCIe pair joined
by an NVLink bridge, an SXM module on an NVSwitch board) and the vSphere release (7.0.3 or
8.0.x), plus the mode the template asks for. The spec rules refuse what this table refuses,
the placement and the planner follow what it allows, and docs/vsphere.md prints it
(tests/unit/test_gpu_attach.py keeps the page and the table the same).

Sources (each row names its own):
- NVIDIA AI Enterprise, vGPU on NVSwitch systems: GPU passthrough is not supported on
  NVSwitch systems under VMware vSphere, only time-sliced vGPU; vGPUs that talk peer to peer
  must be in one VM; a VM's GPUs must form one Fabric Manager partition.
- vSphere API reference 8.0.0.1: vendor device groups (`HostAssignableHardwareManager
  .RetrieveVendorDeviceGroupInfo`, `ConfigTarget.vendorDeviceGroupInfo`,
  `VirtualMachineConfigSpec.deviceGroups`); NVLink-bridged PCIe pairs are device groups too.
  vSphere 7.0.3 has none of these, and no NVLink topology at all.

    >>> decide(GpuKind.nvswitch, "8.0.3", GpuMode.vgpu).mechanism
    <Mechanism.device_group_vgpu: 'device-group-vgpu'>
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from rackcert.core.spec import GpuMode

NVAIE_NVSWITCH = (
    "NVIDIA AI Enterprise: GPU passthrough is not supported on NVSwitch systems under VMware"
    " vSphere; only time-sliced vGPU is"
)
DEVICE_GROUP_API = (
    "vendor device groups exist from vSphere API 8.0.0.1 (ConfigSpec.deviceGroups); vSphere 7.0.3"
    " has none"
)


class GpuKind(StrEnum):
    """What joins a VM's GPUs: nothing, an NVLink bridge, or an NVSwitch board."""

    pcie = "pcie"
    nvlink_pair = "nvlink-pair"
    nvswitch = "nvswitch"


class Mechanism(StrEnum):
    """What provision builds for the VM's GPUs."""

    passthrough = "passthrough"
    vgpu = "vgpu"
    device_group_passthrough = "device-group"
    device_group_vgpu = "device-group-vgpu"


@dataclass(frozen=True)
class Decision:
    """One cell of the table: a mechanism, or a refusal with the statement it follows."""

    mechanism: Mechanism | None
    source: str
    refusal: str = ""

    @property
    def uses_device_group(self) -> bool:
        return self.mechanism in (Mechanism.device_group_passthrough, Mechanism.device_group_vgpu)


def vsphere_line(version: str) -> str:
    """`7.0` or `8.0`: the release line that decides what the API offers."""
    return "8.0" if version.split(".")[0] == "8" else "7.0"


_PT_DOC = "VMware DirectPath I/O (VirtualPCIPassthrough, fixed backing)"
_VGPU_DOC = "NVIDIA vGPU for vSphere (VirtualPCIPassthroughVmiopBackingInfo)"
_PAIR_7 = "vSphere 7.0.3 shows no NVLink: the pair is declared in the spec (nvlink_peer)"
_PAIR_8 = "vSphere 8 (API 8.0.0.1): an NVLink-bridged pair is a vendor device group"

TABLE: dict[tuple[GpuKind, str, GpuMode], Decision] = {
    (GpuKind.pcie, "7.0", GpuMode.passthrough): Decision(Mechanism.passthrough, _PT_DOC),
    (GpuKind.pcie, "7.0", GpuMode.vgpu): Decision(Mechanism.vgpu, _VGPU_DOC),
    (GpuKind.pcie, "8.0", GpuMode.passthrough): Decision(Mechanism.passthrough, _PT_DOC),
    (GpuKind.pcie, "8.0", GpuMode.vgpu): Decision(Mechanism.vgpu, _VGPU_DOC),
    (GpuKind.nvlink_pair, "7.0", GpuMode.passthrough): Decision(Mechanism.passthrough, _PAIR_7),
    (GpuKind.nvlink_pair, "7.0", GpuMode.vgpu): Decision(Mechanism.vgpu, _PAIR_7),
    (GpuKind.nvlink_pair, "8.0", GpuMode.passthrough): Decision(
        Mechanism.device_group_passthrough, _PAIR_8
    ),
    (GpuKind.nvlink_pair, "8.0", GpuMode.vgpu): Decision(Mechanism.device_group_vgpu, _PAIR_8),
    (GpuKind.nvswitch, "7.0", GpuMode.passthrough): Decision(
        None, NVAIE_NVSWITCH, refusal=NVAIE_NVSWITCH
    ),
    (GpuKind.nvswitch, "7.0", GpuMode.vgpu): Decision(
        None, DEVICE_GROUP_API, refusal=DEVICE_GROUP_API
    ),
    (GpuKind.nvswitch, "8.0", GpuMode.passthrough): Decision(
        None, NVAIE_NVSWITCH, refusal=NVAIE_NVSWITCH
    ),
    (GpuKind.nvswitch, "8.0", GpuMode.vgpu): Decision(
        Mechanism.device_group_vgpu,
        "NVIDIA AI Enterprise (vGPU only, one Fabric Manager partition per VM) and vSphere 8"
        " vendor device groups",
    ),
}


def host_line(vcenter_version: str, esxi_version: str) -> str:
    """The release line a host's VMs get: the older of vCenter's and the host's own.

    A device group needs both: vCenter sends the ConfigSpec, ESXi builds the VM from it.
    """
    lines = {vsphere_line(vcenter_version), vsphere_line(esxi_version)}
    return "7.0" if "7.0" in lines else "8.0"


def decide(kind: GpuKind, version: str, mode: GpuMode) -> Decision:
    """The one answer to "how does this VM get its GPUs" for a GPU kind, release and mode."""
    return TABLE[(kind, vsphere_line(version), mode)]


_KIND_LABEL = {
    GpuKind.pcie: "PCIe GPU",
    GpuKind.nvlink_pair: "PCIe pair, NVLink bridge (2-GPU VM)",
    GpuKind.nvswitch: "HGX board, SXM + NVSwitch",
}
_MECH_LABEL = {
    Mechanism.passthrough: "passthrough",
    Mechanism.vgpu: "vGPU",
    Mechanism.device_group_passthrough: "device group (passthrough)",
    Mechanism.device_group_vgpu: "device group (vGPU)",
}


def support_table_markdown() -> str:
    """The table as docs/vsphere.md prints it: one row per GPU kind and mode."""
    lines = [
        "| GPU kind | gpu_mode | vSphere 7.0.3 | vSphere 8.0.x |",
        "|---|---|---|---|",
    ]
    for kind in GpuKind:
        for mode in GpuMode:
            cells = []
            for line in ("7.0", "8.0"):
                d = TABLE[(kind, line, mode)]
                cells.append(_MECH_LABEL[d.mechanism] if d.mechanism else f"refused ({d.refusal})")
            lines.append(f"| {_KIND_LABEL[kind]} | {mode.value} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)
