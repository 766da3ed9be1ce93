"""The rack spec: what a rack must be, as pydantic v2 models.

Every stage reads these models and nothing else about the user's intent. Models
forbid unknown keys so a typo in a spec is an error, not a silently ignored
wish. Cross-field rules (references, NVLink pairs, GPU ownership) live in
`rackcert.spec_rules`; loading from YAML with file:line errors lives in
`rackcert.spec_loader`.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

API_VERSION = "rackcert/v1"
KIND = "Rack"

_PCI_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
_THUMB_RE = re.compile(r"^([0-9A-F]{2}:){31}[0-9A-F]{2}$")

Name = Annotated[str, Field(pattern=_NAME_RE, min_length=1, max_length=63)]


def normalize_pci(value: str) -> str:
    """Accept `17:00.0` or `0000:17:00.0` in any case; store the long lower form.

    vSphere reports PCI ids as `0000:17:00.0`; users copy `17:00.0` from lspci.
    """
    text = value.strip().lower()
    if re.fullmatch(r"[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", text):
        text = "0000:" + text
    if not _PCI_RE.fullmatch(text):
        raise ValueError(f"not a PCI address (want dddd:bb:dd.f, e.g. 0000:17:00.0): {value!r}")
    return text


PciAddress = Annotated[
    str, AfterValidator(normalize_pci), Field(description="PCI address, 0000:bb:dd.f")
]


class Strict(BaseModel):
    """Base for every spec model: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=False)


class Metadata(Strict):
    name: Name = Field(description="Rack name; names the run directory runs/<name>/")
    description: str = ""
    site: str = ""
    owner: str = ""


class TLS(Strict):
    verify: bool = Field(True, description="Verify the vCenter certificate. Off only on purpose.")
    ca_file: str | None = Field(None, description="PEM bundle that signs vCenter's certificate")
    thumbprint: str | None = Field(
        None, description="SHA-256 fingerprint of vCenter's certificate, AA:BB:... (pinning)"
    )

    @field_validator("thumbprint")
    @classmethod
    def _thumbprint_shape(cls, value: str | None) -> str | None:
        if value is None:
            return value
        text = value.strip().upper().replace("-", ":")
        if ":" not in text and len(text) == 64:
            text = ":".join(text[i : i + 2] for i in range(0, 64, 2))
        if not _THUMB_RE.fullmatch(text):
            raise ValueError("thumbprint must be a SHA-256 fingerprint: 32 hex bytes, AA:BB:...")
        return text


class VCenter(Strict):
    host: str = Field(min_length=1, description="vCenter (or ESXi) host name or address")
    port: int = Field(443, ge=1, le=65535)
    protocol: Literal["https", "http"] = Field(
        "https", description="http only for a local simulator; never for a real vCenter"
    )
    user: str = Field(min_length=1)
    password_env: str | None = Field(None, description="Environment variable holding the password")
    password_file: str | None = Field(None, description="File holding the password (one line)")
    datacenter: str | None = None
    cluster: str | None = None
    tls: TLS = Field(default_factory=TLS)


class Gpu(Strict):
    pci: PciAddress
    model: str = Field(min_length=1, description="e.g. 'NVIDIA A100 PCIe 80GB'")
    memory_gb: int = Field(gt=0, le=1024, description="GPU memory; sizes the VM's 64-bit MMIO")
    numa: int = Field(0, ge=0, le=15, description="NUMA node the GPU hangs off")
    nvlink_peer: PciAddress | None = Field(
        None, description="PCI address of the GPU joined to this one by an NVLink bridge"
    )


class Nic(Strict):
    pci: PciAddress
    model: str = Field(min_length=1, description="e.g. 'Mellanox ConnectX-6 Dx'")
    ports: int = Field(1, ge=1, le=8, description="Ports (PCI functions) of the card")
    speed_gbps: int = Field(gt=0, le=3200, description="Line rate of one port")
    numa: int = Field(0, ge=0, le=15)


class HardwareProfile(Strict):
    name: Name
    server_model: str = Field(min_length=1)
    vendor: str = ""
    numa_nodes: int = Field(2, ge=1, le=16)
    gpus: list[Gpu] = Field(default_factory=list)
    nics: list[Nic] = Field(default_factory=list)


class Host(Strict):
    name: Name
    address: str = Field(min_length=1, description="ESXi management address as vCenter knows it")
    profile: Name = Field(description="Name of a hardware_profiles entry")
    esxi_version: str = Field("7.0.3", description="Expected ESXi version, e.g. 7.0.3")


class NvlinkPolicy(StrEnum):
    required = "required"
    preferred = "preferred"
    none = "none"


class NicMode(StrEnum):
    passthrough = "passthrough"
    sriov = "sriov"
    vmxnet3 = "vmxnet3"


class GpuMode(StrEnum):
    passthrough = "passthrough"
    vgpu = "vgpu"


class VmTemplate(Strict):
    name: Name
    vcpus: int = Field(ge=1, le=768, description="Virtual CPUs (the seed: 32)")
    memory_gb: int = Field(
        ge=1, le=24576, description="Memory, fully reserved (memoryReservationLockedToMax)"
    )
    gpus: int = Field(0, ge=0, le=16, description="GPUs per VM")
    nvlink: NvlinkPolicy = Field(
        NvlinkPolicy.preferred,
        description="required: a bridged pair or fail; preferred: a pair when one is free; none",
    )
    nic: NicMode = Field(
        NicMode.vmxnet3, description="Data NIC: passthrough (the NUMA-local port), sriov, vmxnet3"
    )
    numa_affinity: bool = Field(True, description="Pin the VM to the NUMA node of its GPUs")
    gpu_mode: GpuMode = Field(
        GpuMode.passthrough, description="passthrough (DirectPath I/O) or vgpu (NVIDIA vGPU)"
    )
    vgpu_profile: str | None = Field(None, description="vGPU profile, e.g. grid_a100-40c")
    mmio_size_gb: int | None = Field(
        None, ge=1, description="Override pciPassthru.64bitMMIOSizeGB (default from GPU memory)"
    )
    hardware_version: str = Field("vmx-19", description="VM hardware version")
    guest_id: str = "ubuntu64Guest"


class Vm(Strict):
    name: Name
    template: Name = Field(description="Name of a vm_templates entry")
    host: str = Field("auto", description="Host name, or 'auto' for placement by the planner")
    address: str = Field(min_length=1, description="Guest address rackcert reaches over SSH")
    ssh_port: int = Field(22, ge=1, le=65535)
    allow_split_pair: bool = Field(
        False, description="Allow this VM's GPUs to break up an NVLink pair (explicit override)"
    )
    gpus: list[PciAddress] | None = Field(
        None, description="Explicit host GPUs for this VM (default: chosen by placement)"
    )


class PackageSource(Strict):
    """Where a vendor package comes from; a local path makes air-gapped sites work."""

    repo_url: str | None = None
    path: str | None = Field(None, description="Local ISO, tarball or apt/yum repo directory")
    package: str | None = Field(None, description="Package name when it differs from the default")


class GuestSsh(Strict):
    user: str = "root"
    key_file: str | None = Field(None, description="Private key rackcert uses to reach the VMs")
    become: bool = False


class Guest(Strict):
    os: str = Field("ubuntu-22.04", description="ubuntu-20.04, ubuntu-22.04, rhel-8, rhel-9")
    nvidia_driver: str | None = Field(None, description="Pinned version (470.82.01) or branch")
    cuda: str | None = Field(None, description="CUDA toolkit version, e.g. 11.4")
    ofed: str | None = Field(None, description="MLNX_OFED / DOCA-OFED version, e.g. 5.4-3.1.0.0")
    container_toolkit: str | None = Field(None, description="nvidia-container-toolkit version")
    container_runtime: Literal["docker", "containerd", "none"] = "docker"
    python_packages: list[str] = Field(default_factory=list)
    horovod: bool = Field(False, description="Install Horovod in the DL runtime")
    dl_venv: str = Field(
        "/opt/rackcert/venv",
        pattern=r"^/[A-Za-z0-9._/-]*$",
        description="The nodes' deep-learning environment; the bench worker runs from it",
    )
    dl_system_site_packages: bool = Field(
        False,
        description="The DL environment sees the node image's own packages (its torch)",
    )
    sources: dict[str, PackageSource] = Field(
        default_factory=dict,
        description="Per component (ofed, nvidia_driver, cuda, container_toolkit, dl_runtime)",
    )
    ssh: GuestSsh = Field(default_factory=GuestSsh)


class Nfs(Strict):
    server: str = Field(min_length=1)
    export: str = Field(min_length=1)
    mount_point: str = Field("/mnt/data", min_length=1)
    options: list[str] = Field(default_factory=lambda: ["vers=3", "nconnect=8", "hard"])
    fstype: Literal["nfs", "nfs4", "none"] = Field(
        "nfs", description="'none' bind-mounts the export path (lab use)"
    )
    create_synthetic_data: bool = Field(
        False, description="Let the storage benchmark create small files if the mount is empty"
    )


class Storage(Strict):
    nfs: Nfs | None = None


class Roce(Strict):
    enabled: bool = False
    pfc_priority: int = Field(3, ge=0, le=7)
    dscp: int = Field(26, ge=0, le=63)


class Network(Strict):
    mtu: int = Field(9000, ge=576, le=9216, description="MTU of the data interface (jumbo frames)")
    interface: str | None = Field(None, description="Guest data interface; default: the route's")
    roce: Roce = Field(default_factory=Roce)


class Certification(Strict):
    reference: str | None = Field(None, description="Certified-matrix entry to compare against")
    scaling_efficiency_min: float = Field(
        0.9, gt=0, le=1.5, description="ResNet50 weak-scaling efficiency vs N x 1 node, at least"
    )
    allreduce_busbw_fraction_min: float = Field(
        0.7, gt=0, le=1.5, description="Allreduce busbw at the largest sizes / line rate, at least"
    )
    resnet50_images_per_gpu_min: float = Field(
        0, ge=0, description="ResNet50 images/s per GPU, at least (0: not judged)"
    )
    line_rate_gbps: float | None = Field(
        None, gt=0, description="Override the link line rate (default: the NIC port speed)"
    )
    dcgm_diag_level: int = Field(
        1,
        ge=0,
        le=4,
        description="`dcgmi diag -r LEVEL` on GPU nodes where DCGM is installed"
        " (1 quick .. 4 extended; 0: not run)",
    )


class Spec(Strict):
    apiVersion: Literal["rackcert/v1"] = API_VERSION  # noqa: N815 - the YAML key
    kind: Literal["Rack"] = KIND
    metadata: Metadata
    vcenter: VCenter
    hardware_profiles: list[HardwareProfile] = Field(min_length=1)
    hosts: list[Host] = Field(min_length=1)
    vm_templates: list[VmTemplate] = Field(default_factory=list)
    vms: list[Vm] = Field(default_factory=list)
    guest: Guest = Field(default_factory=Guest)
    storage: Storage = Field(default_factory=Storage)
    network: Network = Field(default_factory=Network)
    certification: Certification = Field(default_factory=Certification)

    # Lookups every stage needs; cheap enough to rebuild on each call.
    def profile(self, name: str) -> HardwareProfile:
        return next(p for p in self.hardware_profiles if p.name == name)

    def host(self, name: str) -> Host:
        return next(h for h in self.hosts if h.name == name)

    def template(self, name: str) -> VmTemplate:
        return next(t for t in self.vm_templates if t.name == name)

    def host_profile(self, host_name: str) -> HardwareProfile:
        return self.profile(self.host(host_name).profile)

    def line_rate_gbps(self) -> float | None:
        """The link a multi-node allreduce crosses: the override, else the slowest NIC port."""
        if self.certification.line_rate_gbps:
            return self.certification.line_rate_gbps
        speeds = [n.speed_gbps for p in self.hardware_profiles for n in p.nics]
        return float(min(speeds)) if speeds else None
