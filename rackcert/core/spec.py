"""The rack spec: what a rack must be, as pydantic v2 models.

Every stage reads these models and nothing else about the user's intent. Models
forbid unknown keys so a typo in a spec is an error, not a silently ignored
wish. Cross-field rules (references, NVLink pairs, GPU ownership) live in
`rackcert.core.spec_rules`; loading from YAML with file:line errors lives in
`rackcert.core.spec_loader`.
"""

from __future__ import annotations

import ipaddress
import re
from enum import StrEnum
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from rackcert.core.results import VerdictCheckId

API_VERSION: Final = "rackcert/v1"
KIND: Final = "Rack"

_PCI_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
_THUMB_RE = re.compile(r"^([0-9A-F]{2}:){31}[0-9A-F]{2}$")

Name = Annotated[str, Field(pattern=_NAME_RE, min_length=1, max_length=63)]
# vSphere inventory names (templates, datastores, port groups) may hold spaces; at most 80 chars.
VSphereName = Annotated[str, Field(pattern=r"^[^/\\%]+$", min_length=1, max_length=80)]


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


# Jinja's statement, expression and comment openers. Every spec value reaches Ansible, which
# templates strings from inventory files and extra vars on the controller: a spec string that
# holds one of these would run code there (`{{ lookup('pipe', ...) }}`). No spec value needs them.
_JINJA_MARKERS = ("{{", "{%", "{#")


def _template_free(value: Any) -> Any:
    """Refuse Jinja markers in a validated field: its strings, list items and mapping keys.

    Runs after validation, so nested models are model instances here and check their own
    fields (the error then names the exact field).
    """
    if isinstance(value, str):
        for marker in _JINJA_MARKERS:
            if marker in value:
                raise ValueError(
                    f"{marker!r} is not allowed in a spec value (Ansible would evaluate it as a"
                    " Jinja template on the controller)"
                )
    elif isinstance(value, list | tuple | set):
        for item in value:
            _template_free(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            _template_free(key)
            _template_free(item)
    return value


class Strict(BaseModel):
    """Base for every spec model: unknown keys are errors, and no value is a Jinja template."""

    model_config = ConfigDict(extra="forbid", frozen=False)

    @field_validator("*", mode="after")
    @classmethod
    def _no_templates(cls, value: Any) -> Any:
        return _template_free(value)


# Host name labels as RFC 1123 has them (letters, digits, hyphen; no leading or trailing
# hyphen), plus "_", which vCenter inventory names carry (the simulator's DC0_C0_H0); at most
# 253 characters in all. An address that starts with "-" would be read as an option by ssh.
_HOST_LABEL_RE = re.compile(r"^(?!-)[A-Za-z0-9_-]{1,63}(?<!-)$")


def check_host_address(value: str) -> str:
    """A host name (RFC 1123) or an IPv4/IPv6 address, nothing a command line could misread."""
    text = value.strip()
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        pass
    labels = text.rstrip(".").split(".")
    if len(text) > 253 or not all(_HOST_LABEL_RE.match(label) for label in labels):
        raise ValueError(f"not a host name or IP address: {value!r}")
    return text


HostAddress = Annotated[
    str, AfterValidator(check_host_address), Field(description="Host name or IP address")
]

# POSIX portable user name (IEEE Std 1003.1, 3.437 and 3.282): letters, digits, ".", "_",
# "-", not starting with "-"; 32 characters is the Linux shadow-utils limit.
_USER_RE = r"^[A-Za-z0-9._][A-Za-z0-9._-]{0,31}$"
UserName = Annotated[str, Field(pattern=_USER_RE, description="POSIX user name")]

# Linux interface names: at most IFNAMSIZ-1 = 15 bytes, no "/", ":" or white space
# (net/core/dev.c dev_valid_name); a leading "-" is refused too, as ip(8) would read an option.
_IFNAME_RE = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}$"
InterfaceName = Annotated[str, Field(pattern=_IFNAME_RE, description="Network interface name")]


# The vCenter releases rackcert speaks: 7.0.3 (the seed's rack) and vSphere 8.0 GA to U3.
# vSphere 7 left general support on 2 October 2025; 8.0 is what a new rack runs.
VSphereVersion = Annotated[
    str,
    Field(pattern=r"^(7\.0\.3|8\.0(\.[0-3])?)$", description="7.0.3, 8.0, 8.0.1, 8.0.2 or 8.0.3"),
]


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
    host: HostAddress = Field(description="vCenter (or ESXi) host name or address")
    port: int = Field(443, ge=1, le=65535)
    protocol: Literal["https", "http"] = Field(
        "https", description="http only for a local simulator; never for a real vCenter"
    )
    allow_plain_http: bool = Field(
        False,
        description="Let protocol: http reach a host that is not loopback (the password"
        " then crosses the network in clear). Off: such a spec is refused.",
    )
    user: str = Field(min_length=1)
    password_env: str | None = Field(None, description="Environment variable holding the password")
    password_file: str | None = Field(None, description="File holding the password (one line)")
    datacenter: str | None = None
    cluster: str | None = None
    version: VSphereVersion = Field(
        "7.0.3",
        description="vCenter Server release: 7.0.3, or 8.0 to 8.0.3 (vSphere 8 adds vendor device"
        " groups, API 8.0.0.1, which HGX boards need)",
    )
    tls: TLS = Field(default_factory=TLS)

    @model_validator(mode="after")
    def _plain_http_stays_local(self) -> VCenter:
        """The login sends the password: over http it may only travel the loopback."""
        if self.protocol == "http" and not self.allow_plain_http and not _is_loopback(self.host):
            raise ValueError(
                f"protocol: http to {self.host}, which is not loopback, would send the vCenter"
                " password in clear; use https, or set allow_plain_http: true on purpose"
            )
        return self


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Gpu(Strict):
    pci: PciAddress
    model: str = Field(min_length=1, description="e.g. 'NVIDIA A100 PCIe 80GB'")
    memory_gb: int = Field(gt=0, le=1024, description="GPU memory; sizes the VM's 64-bit MMIO")
    numa: int = Field(0, ge=0, le=15, description="NUMA node the GPU hangs off")
    nvlink_peer: PciAddress | None = Field(
        None, description="PCI address of the GPU joined to this one by an NVLink bridge"
    )
    module_id: int | None = Field(
        None,
        ge=1,
        le=16,
        description="SXM module ID on an HGX board (nvidia-smi -q 'Module ID'; the Fabric"
        " Manager partitions name GPUs by it); only for a profile with a board",
    )


class Nic(Strict):
    pci: PciAddress
    model: str = Field(min_length=1, description="e.g. 'Mellanox ConnectX-6 Dx'")
    ports: int = Field(1, ge=1, le=8, description="Ports (PCI functions) of the card")
    speed_gbps: int = Field(gt=0, le=3200, description="Line rate of one port")
    numa: int = Field(0, ge=0, le=15)


class NvSwitch(Strict):
    pci: PciAddress
    model: str = Field("NVIDIA NVSwitch", min_length=1, description="e.g. 'NVIDIA NVSwitch Gen3'")


class FabricPartition(Strict):
    """One Fabric Manager GPU partition of an NVSwitch board: the GPUs a VM may take together."""

    id: int = Field(ge=0, le=63, description="Fabric Manager partition ID")
    modules: list[int] = Field(
        min_length=1, max_length=16, description="SXM module IDs of the partition's GPUs"
    )

    @property
    def name(self) -> str:
        """How a VM names it (vms[].device_group) and how plans show it."""
        return f"partition-{self.id}"


def hgx_8gpu_partitions() -> list[FabricPartition]:
    """The default partitions of an 8-GPU HGX H100/H200 board, as NVIDIA Fabric Manager lists them.

    NVIDIA Fabric Manager User Guide, "Shared NVSwitch Virtualization Model", default GPU
    partitions of the HGX H100 8-GPU baseboard (the H200 board shares it): partition 0 is
    all eight modules, 1 and 2 are modules 1-4 and 5-8, 3 to 6 are {1,3} {2,4} {5,7} {6,8},
    7 to 14 are the single modules 1 to 8.
    """
    rows = [list(range(1, 9)), [1, 2, 3, 4], [5, 6, 7, 8], [1, 3], [2, 4], [5, 7], [6, 8]]
    rows += [[m] for m in range(1, 9)]
    return [FabricPartition(id=i, modules=mods) for i, mods in enumerate(rows)]


class Board(Strict):
    """An HGX baseboard: SXM GPU modules joined by NVSwitches, split into Fabric Manager partitions.

    Under vSphere such GPUs are vGPU only and a VM takes one whole partition (NVIDIA AI
    Enterprise); vSphere 8 shows each partition as a vendor device group.
    """

    name: str = Field(min_length=1, max_length=80, description="e.g. 'HGX H200 8-GPU'")
    nvswitches: list[NvSwitch] = Field(
        min_length=1, description="The board's NVSwitch chips (HGX H100/H200: 4)"
    )
    partitions: list[FabricPartition] = Field(
        default_factory=hgx_8gpu_partitions,
        description="Fabric Manager partitions (default: the 8-GPU HGX H100/H200 table, IDs 0-14,"
        " from NVIDIA's Fabric Manager User Guide)",
    )

    def partition(self, ident: int) -> FabricPartition | None:
        return next((p for p in self.partitions if p.id == ident), None)

    def sizes(self) -> list[int]:
        return sorted({len(p.modules) for p in self.partitions})


class HardwareProfile(Strict):
    name: Name
    server_model: str = Field(min_length=1)
    vendor: str = ""
    numa_nodes: int = Field(2, ge=1, le=16)
    gpus: list[Gpu] = Field(default_factory=list)
    nics: list[Nic] = Field(default_factory=list)
    board: Board | None = Field(
        None, description="HGX baseboard (SXM modules, NVSwitches, Fabric Manager partitions)"
    )

    def module_gpu(self, module: int) -> Gpu | None:
        """The GPU on SXM module `module` of the board, if the profile has one."""
        return next((g for g in self.gpus if g.module_id == module), None)


class Host(Strict):
    name: Name
    address: HostAddress = Field(description="ESXi management address as vCenter knows it")
    profile: Name = Field(description="Name of a hardware_profiles entry")
    esxi_version: str = Field("7.0.3", description="Expected ESXi version, e.g. 7.0.3")


class VgpuManagerSource(Strict):
    depot: str = Field(
        description="Where the host installs the NVIDIA vGPU manager from (esxcli software vib"
        " install -d): the offline bundle .zip as a path on the host (/vmfs/volumes/<datastore>"
        "/NVD-AIE-800_ESXi_8.0.0_Driver_....zip), or a depot URL (http/https)"
    )

    @field_validator("depot")
    @classmethod
    def _depot_esxcli_reads(cls, value: str) -> str:
        """What `esxcli software vib install -d` takes (ESXCLI reference: full remote URLs of
        the depot index.xml, or a server file path to an offline bundle .zip)."""
        text = value.strip()
        if text.startswith(("http://", "https://")) and " " not in text:
            return text
        if text.startswith("/") and text.lower().endswith(".zip") and " " not in text:
            return text
        raise ValueError(
            f"{value!r}: give the offline bundle as an absolute .zip path on the host"
            " (/vmfs/volumes/...) or a depot URL (http/https)"
        )


class HostSoftware(Strict):
    vgpu_manager: VgpuManagerSource | None = Field(
        None,
        description="The NVIDIA vGPU manager VIB for hosts of vGPU VMs: provision installs it"
        " in maintenance mode and reboots the host; none: plan reports what to install",
    )
    vgpu_manager_version: str | None = Field(
        None,
        pattern=r"^[0-9][0-9A-Za-z._-]*$",
        description="The vGPU manager (host VIB) version the hosts run, e.g. 550.127.06;"
        " `rackcert upgrade` refuses a guest driver of a newer branch",
    )
    components: dict[str, str] = Field(
        default_factory=dict,
        description="Other ESXi image components the hosts run, by vLCM component name"
        " (e.g. nmlx5-core: 4.23.0.66); a change is a host-image layer of `rackcert upgrade`",
    )


class NvlinkPolicy(StrEnum):
    required = "required"
    preferred = "preferred"
    none = "none"


class NicMode(StrEnum):
    passthrough = "passthrough"
    sriov = "sriov"
    vmxnet3 = "vmxnet3"


class NumaPolicy(StrEnum):
    preferred = "preferred"
    required = "required"


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
    gpu_nic_numa: NumaPolicy = Field(
        NumaPolicy.preferred,
        description="GPUDirect RDMA between the VM's GPUs and its passthrough NIC port (NVIDIA:"
        " same PCIe root complex): preferred: on one NUMA node when the host has them free, a"
        " plan warning otherwise; required: refuse a placement that crosses nodes",
    )
    gpu_mode: GpuMode = Field(
        GpuMode.passthrough, description="passthrough (DirectPath I/O) or vgpu (NVIDIA vGPU)"
    )
    vgpu_profile: str | None = Field(None, description="vGPU profile, e.g. grid_a100-40c")
    mmio_size_gb: int | None = Field(
        None, ge=1, description="Override pciPassthru.64bitMMIOSizeGB (default from GPU memory)"
    )
    hardware_version: str = Field("vmx-19", description="VM hardware version")
    guest_id: str = "ubuntu64Guest"
    source: VSphereName | None = Field(
        None,
        description="vSphere VM template the VMs are cloned from (CloneVM_Task), by inventory"
        " name; it must be marked as a template, have a disk, EFI firmware and cloud-init."
        " Each clone's identity goes in through cloud-init's VMware guestinfo keys"
        " (guestinfo.metadata, guestinfo.userdata, gzip+base64), which the guest and vCenter"
        " users can read: only its hostname, address and the public SSH key, nothing secret."
        " Without a source provision can only check VMs that already exist",
    )
    datastore: VSphereName | None = Field(
        None, description="Datastore of the clone's files and disk (default: the template's)"
    )
    disk_gb: int | None = Field(
        None,
        ge=1,
        le=62 * 1024,
        description="Grow the template's first disk to this size (never shrinks it)",
    )
    network: VSphereName | None = Field(
        None,
        description="Port group of the VM's vmxnet3 management NIC, where vms[].address lives"
        " (default: the template's NIC as it is); the data NIC is separate (nic)",
    )


class Vm(Strict):
    name: Name
    template: Name = Field(description="Name of a vm_templates entry")
    host: str = Field("auto", description="Host name, or 'auto' for placement by the planner")
    address: HostAddress = Field(description="Guest address rackcert reaches over SSH")
    ssh_port: int = Field(22, ge=1, le=65535)
    allow_split_pair: bool = Field(
        False, description="Allow this VM's GPUs to break up an NVLink pair (explicit override)"
    )
    gpus: list[PciAddress] | None = Field(
        None, description="Explicit host GPUs for this VM (default: chosen by placement)"
    )
    device_group: str | None = Field(
        None,
        pattern=r"^partition-[0-9]{1,2}$",
        description="A named device group of the VM's host: an HGX board's Fabric Manager"
        " partition, partition-<id> (default: placement picks a free one of the template's size)",
    )


# What the vendor_package role can turn into a package source (tasks/local-*.yml there):
# a repository directory, a tarball it unpacks (MLNX_OFED's .tgz) or an ISO it mounts.
_TARBALL_SUFFIXES = (".tgz", ".tar.gz")
_DIRECTORY_LOOKALIKES = (".zip", ".tar", ".tar.xz", ".tar.bz2", ".txz", ".rpm", ".deb")
_VAR_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def source_kind(path: str) -> str:
    """`directory`, `tarball` or `iso`: how the roles use a `path` source."""
    lower = path.lower()
    if lower.endswith(_TARBALL_SUFFIXES):
        return "tarball"
    if lower.endswith(".iso"):
        return "iso"
    if lower.endswith(".run"):
        return "run"
    return "directory"


class PackageSource(Strict):
    """Where a vendor package comes from; a local path makes air-gapped sites work.

    A repository is checked against its signing key (`key_url` or `key_file`); a `path`
    on the node is the operator's own copy and trusted unless a key is given.
    """

    repo_url: str | None = Field(None, description="apt/yum repository URL (file:// works too)")
    path: str | None = Field(
        None,
        description="On the node: a repository directory, a .tgz to unpack (MLNX_OFED) or an .iso;"
        " for nccl_tests the source tarball ON THE CONTROLLER (.tar.gz); for nvidia_driver also"
        " NVIDIA's vGPU guest driver installer ON THE CONTROLLER (NVIDIA-Linux-x86_64-<v>-grid.run,"
        " with sha256)",
    )
    package: str | None = Field(None, description="Package name when it differs from the default")
    sha256: str | None = Field(
        None,
        pattern=r"^[0-9a-fA-F]{64}$",
        description="nccl_tests and an nvidia_driver .run: the pinned SHA-256 of the file"
        " (checked before it is unpacked or run)",
    )
    version: str | None = Field(
        None,
        pattern=r"^[0-9A-Za-z][0-9A-Za-z._+-]*$",
        description="nccl_tests only: the version the tarball holds (installs under"
        " /opt/rackcert/nccl-tests-VERSION)",
    )
    key_url: str | None = Field(None, description="URL of the repository's signing key")
    key_file: str | None = Field(
        None,
        description="Signing key on the controller, copied to the node (.asc armoured or .gpg)",
    )

    @field_validator("path")
    @classmethod
    def _usable_path(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if not value.startswith("/"):
            raise ValueError(f"path must be absolute on the node: {value!r}")
        lower = value.lower()
        if source_kind(value) == "directory" and lower.endswith(_DIRECTORY_LOOKALIKES):
            raise ValueError(
                f"{value!r}: the roles take a repository directory, a .tgz/.tar.gz tarball or an"
                " .iso image; unpack this file into a repository directory and give that"
            )
        return value

    @field_validator("key_file")
    @classmethod
    def _key_suffix(cls, value: str | None) -> str | None:
        if value is not None and not value.lower().endswith((".asc", ".gpg", ".key", ".pub")):
            raise ValueError(
                f"{value!r}: a signing key file ends in .asc (armoured) or .gpg (binary keyring)"
            )
        return value

    @model_validator(mode="after")
    def _one_key(self) -> PackageSource:
        if self.key_url and self.key_file:
            raise ValueError("give key_url or key_file, not both")
        if (self.key_url or self.key_file) and not (self.repo_url or self.path):
            raise ValueError("a signing key needs a repo_url or path to check")
        return self


# The components whose package source configure's roles read (a closed set).
SourceComponent = Literal[
    "ofed", "nvidia_driver", "cuda", "container_toolkit", "dl_runtime", "nccl_tests"
]
# nccl_tests is built from a pinned source tarball the controller copies (nothing downloads).
_PINNED_TARBALL = "nccl_tests"


def _check_sources(sources: dict[str, PackageSource]) -> None:
    """nccl_tests is a pinned tarball (path, sha256, version); the others are packages."""
    for name, src in sources.items():
        pinned = {"sha256": src.sha256, "version": src.version}
        if source_kind(src.path or "") == "run":
            _check_run_file(name, src)
            continue
        if name != _PINNED_TARBALL:
            extra = [k for k, v in pinned.items() if v is not None]
            if extra:
                raise ValueError(
                    f"{name}: {extra[0]} is for nccl_tests only (a pinned source tarball)"
                )
            continue
        missing = [k for k, v in {"path": src.path, **pinned}.items() if v is None]
        if missing:
            raise ValueError(
                "nccl_tests needs path (the source tarball on the controller), sha256"
                f" and version; {missing[0]} is missing"
            )
        if src.repo_url or src.key_url or src.key_file or src.package:
            raise ValueError("nccl_tests takes path, sha256 and version only")
        if source_kind(src.path or "") != "tarball":
            raise ValueError(f"nccl_tests.path {src.path!r}: give the .tar.gz source tarball")
        src.sha256 = (src.sha256 or "").lower()


def _check_run_file(name: str, src: PackageSource) -> None:
    """NVIDIA's .run installer: the vGPU (GRID) guest driver only, pinned by its checksum."""
    if name != "nvidia_driver":
        raise ValueError(f"{name}.path {src.path!r}: a .run installer is for nvidia_driver only")
    if src.sha256 is None:
        raise ValueError(f"nvidia_driver.path {src.path!r}: a .run installer needs its sha256")
    if src.repo_url or src.key_url or src.key_file or src.package or src.version:
        raise ValueError("nvidia_driver with a .run installer takes path and sha256 only")
    src.sha256 = src.sha256.lower()


class GuestSsh(Strict):
    user: UserName = "root"
    key_file: str | None = Field(None, description="Private key rackcert uses to reach the VMs")
    public_key_file: str | None = Field(
        None,
        description="Public key put into cloned VMs' cloud-init user-data as the user's"
        " authorized key (default: key_file + '.pub'); public, so safe in guestinfo",
    )
    known_hosts: str | None = Field(
        None,
        description="known_hosts file pinning the VMs' host keys; without it each key is"
        " enrolled on first contact into the rack's known_hosts and enforced after",
    )
    become: bool = False


class Guest(Strict):
    os: str = Field(
        "ubuntu-22.04",
        description="debian-12, ubuntu-20.04, ubuntu-22.04, ubuntu-24.04, rhel-8, rhel-9",
    )
    nvidia_driver: str | None = Field(None, description="Pinned version (470.82.01) or branch")
    cuda: str | None = Field(None, description="CUDA toolkit version, e.g. 11.4")
    ofed: str | None = Field(None, description="MLNX_OFED / DOCA-OFED version, e.g. 5.4-3.1.0.0")
    container_toolkit: str | None = Field(None, description="nvidia-container-toolkit version")
    nccl: str | None = Field(None, description="NCCL version the DL runtime uses, e.g. 2.21.5")
    container_runtime: Literal["docker", "containerd", "none"] = "docker"
    serial: Annotated[int, Field(ge=0)] | Annotated[str, Field(pattern=r"^(100|[1-9]?[0-9])%$")] = (
        Field(
            0,
            description="Nodes site.yml changes at a time (Ansible's play keyword serial: a count,"
            ' or a percentage such as "25%"; 0 = all at once): a driver change reboots only that'
            " many nodes together",
        )
    )
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
    sources: dict[SourceComponent, PackageSource] = Field(
        default_factory=dict,
        description="Per component (ofed, nvidia_driver, cuda, container_toolkit, dl_runtime,"
        " nccl_tests: {path, sha256, version} of the pinned nccl-tests source tarball on the"
        " controller); any other key is an error, so a misspelt component is never silently"
        " ignored",
    )
    ssh: GuestSsh = Field(default_factory=GuestSsh)
    vgpu_license_token_file: str | None = Field(
        None,
        description="NVIDIA License System client configuration token for vGPU guests: a file"
        " on this machine (the Ansible controller), copied to the nodes and never logged or"
        " recorded; rackcert does not read it",
    )
    ansible_strategy: Literal["mitogen_linear", "linear"] = Field(
        "mitogen_linear",
        description=(
            "The Ansible strategy plugin configure runs site.yml with: mitogen_linear (Mitogen"
            " for Ansible: one Python per node for the run instead of one per task, the same"
            " plays and results) or linear (Ansible's own)"
        ),
    )
    ansible_vars: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Role variables the spec does not model (mlx_ats_skip_reboot, nvidia_driver_dkms,"
            " dl_runtime_mode); passed to Ansible as data, never templated"
        ),
    )

    @field_validator("sources")
    @classmethod
    def _sources(cls, value: dict[str, PackageSource]) -> dict[str, PackageSource]:
        _check_sources(value)
        return value

    @field_validator("ansible_vars")
    @classmethod
    def _var_names(cls, value: dict[str, Any]) -> dict[str, Any]:
        bad = [k for k in value if not isinstance(k, str) or not _VAR_NAME_RE.match(k)]
        if bad:
            raise ValueError(f"not an Ansible variable name: {bad[0]!r}")
        return value


class Nfs(Strict):
    server: HostAddress = Field(description="NFS server host name or address")
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


class ManagementNet(Strict):
    """The guests' management network, where vms[].address lives (cloud-init metadata).

    It goes to each cloned VM through VMware guestinfo, which the guest and every
    vCenter user with read access to the VM can read: addresses only, nothing secret.
    """

    prefix: int = Field(24, ge=8, le=32, description="Prefix length of vms[].address (e.g. 24)")
    gateway: str | None = Field(None, description="Default gateway of the management network")
    dns: list[str] = Field(default_factory=list, description="DNS servers given to the guests")
    search: list[str] = Field(default_factory=list, description="DNS search domains")
    boot_timeout_s: int = Field(
        600,
        ge=1,
        le=7200,
        description="How long provision waits for a powered-on VM (Tools IP or SSH) to answer",
    )
    wait_for: Literal["any", "ssh", "tools"] = Field(
        "any",
        description="What tells provision a VM is up: any (VMware Tools reports vms[].address"
        " as guest.ipAddress, or SSH answers there), ssh (SSH must answer: configure needs it),"
        " tools (guest.ipAddress only)",
    )


def _check_port_range(value: str) -> str:
    low, _, high = value.partition("-")
    first, last = int(low), int(high or low)
    if not 1 <= first <= last <= 65535:
        raise ValueError(f"not a port range LOW-HIGH within 1-65535: {value!r}")
    return value


# A TCP port or range as firewall-cmd's --add-port and slurm.conf's SrunPortRange write it.
PortRange = Annotated[
    str,
    Field(pattern=r"^[0-9]{1,5}(-[0-9]{1,5})?$", description="PORT or LOW-HIGH"),
    AfterValidator(_check_port_range),
]


class Firewalld(Strict):
    """firewalld on EL nodes (RHEL 9 runs it by default and drops what its zone does not allow).

    The roles add their ports to `zone` with `firewall-cmd --permanent` and bind `interfaces`
    to it. NCCL's and Gloo's sockets bind ports the kernel picks (no NCCL or Gloo setting
    names a range), so a data interface that carries them belongs in a zone that accepts its
    traffic, as a site does with `zone: trusted, interfaces: [ib0]`.
    """

    # firewalld refuses zone names longer than 17 characters (firewalld's functions.py,
    # max_zone_name_len).
    zone: str = Field(
        "public", pattern=r"^[A-Za-z0-9_-]{1,17}$", description="firewalld zone the roles use"
    )
    interfaces: list[InterfaceName] = Field(
        default_factory=list, description="Interfaces bound to the zone (e.g. ib0)"
    )


class Firewall(Strict):
    """What the nodes' firewall lets through between the rack's nodes."""

    firewalld: Firewalld | None = Field(
        None,
        description="Manage firewalld on EL nodes (slurm_node, dl_runtime, ssh_trust open their"
        " ports); absent: the roles leave the firewall alone",
    )
    srun_port_range: PortRange = Field(
        "60001-63000",
        description="slurm.conf's SrunPortRange: the ports srun listens on (slurm.conf(5)"
        " example range); opened by slurm_node",
    )
    launcher_port_range: PortRange = Field(
        "29400-29410",
        description="Ports the bench's launchers use: its rendezvous/MASTER_PORT is the first,"
        " Open MPI's TCP BTL the rest; opened by dl_runtime",
    )


class Network(Strict):
    mtu: int = Field(9000, ge=576, le=9216, description="MTU of the data interface (jumbo frames)")
    interface: InterfaceName | None = Field(
        None, description="Guest data interface; default: the route's"
    )
    roce: Roce = Field(default_factory=Roce)
    management: ManagementNet = Field(
        default_factory=ManagementNet,
        description="Prefix, gateway and DNS of vms[].address, written to each clone's"
        " guestinfo.metadata for cloud-init (readable by guest and vCenter users: no secrets)",
    )
    firewall: Firewall = Field(
        default_factory=Firewall,
        description="Ports the roles open in the nodes' firewall and validate's net.firewall"
        " probes between nodes",
    )


LinkTopology = Literal["nvlink", "pcie", "sys", "nic"]


class LinkExpectation(Strict):
    """What an allreduce launch should reach on one kind of link, and where that figure comes
    from. `line_rate_gbps` (Gb/s, one direction) is judged with allreduce_busbw_fraction_min;
    `busbw_gbps` (GB/s, nccl-tests' busbw) is a floor of its own, judged as it stands."""

    topology: LinkTopology = Field(
        description="The link a launch's ranks talk over: nvlink (NV# between its GPUs, the"
        " bridge of a PCIe pair inside one VM), pcie (PIX/PXB/PHB/NODE), sys (across sockets),"
        " nic (between nodes)"
    )
    gpu: str | None = Field(
        None, description="Only for GPUs whose name contains this (e.g. 'A100'); absent: any"
    )
    line_rate_gbps: float | None = Field(None, gt=0, description="Gb/s each way")
    busbw_gbps: float | None = Field(None, gt=0, description="Expected allreduce busbw, GB/s")
    source: str = Field(
        min_length=1, description="Where the figure comes from: a datasheet, a measurement"
    )

    @model_validator(mode="after")
    def _one_figure(self) -> LinkExpectation:
        if (self.line_rate_gbps is None) == (self.busbw_gbps is None):
            raise ValueError("give exactly one of line_rate_gbps and busbw_gbps")
        return self


_ABS_PATH_RE = r"^/[A-Za-z0-9._/+-]*$"
AbsPath = Annotated[str, Field(pattern=_ABS_PATH_RE, max_length=1024)]


class SlurmController(Strict):
    """The site's slurmctld, as its nodes reach it."""

    address: HostAddress = Field(description="slurmctld's address (SlurmctldHost's NodeAddr)")
    port: int = Field(6817, ge=1, le=65535, description="SlurmctldPort")


class SlurmHealthCheck(Strict):
    """rackcert's health check on the nodes: the wrapper slurm.conf's HealthCheckProgram names.

    Why the role installs it: a slurm.conf that names a HealthCheckProgram the node lacks
    makes slurmd run nothing (it logs the failed exec and the node stays in service), so the
    check a site asked for never runs. The wrapper is what `rackcert slurm health-check-conf`
    prints; rackcert itself must already be on the nodes at `rackcert`.
    """

    rackcert: AbsPath = Field(
        "/opt/rackcert/venv/bin/rackcert", description="The rackcert program on the nodes"
    )
    spec_on_node: AbsPath = Field(
        "/etc/rackcert/rack.yaml", description="Where the role puts this spec on the nodes"
    )
    program: AbsPath | None = Field(
        None,
        description="Where the wrapper goes; default: the HealthCheckProgram the site's"
        " slurm.conf names (configless: /etc/slurm/rackcert-health-check)",
    )


class Slurm(Strict):
    """How the rack's nodes join the site's Slurm, and how rackcert talks to it.

    rackcert does not own the controller's configuration: `rackcert slurm conf` prints the
    node and partition lines for the site to add. The munge key is a reference to a file
    on this machine (the Ansible controller), never its content.
    """

    controller: SlurmController
    cluster: Name = Field(description="ClusterName of the site's slurm.conf")
    partition: Name = Field(description="The partition the rack's nodes form")
    munge_key_file: AbsPath = Field(
        description="The site's munge key: a file on this machine, copied to the nodes (0400)"
    )
    install_slurmd: bool = Field(
        True, description="The slurm_node role installs munge and slurmd on the nodes"
    )
    conf_file: AbsPath | None = Field(
        None,
        description="The site's slurm.conf on this machine, copied to the nodes; absent:"
        " configless (slurmd --conf-server controller)",
    )
    client_conf: AbsPath | None = Field(
        None,
        description="slurm.conf srun and scontrol read on this machine (SLURM_CONF);"
        " absent: Slurm's own default",
    )
    munge_socket: AbsPath = Field(
        "/run/munge/munge.socket.2", description="munged's socket on the nodes and here"
    )
    slurmd_port: int = Field(6818, ge=1, le=65535, description="SlurmdPort")
    gres_type: Name | None = Field(
        None, description="Type in Gres=gpu:<type>:<n> (default: from the GPU model, e.g. a100)"
    )
    job_timeout_s: int = Field(
        60,
        ge=1,
        le=86400,
        description="How long a bench job may wait for Slurm to place it before it is given up",
    )
    health_check: SlurmHealthCheck | None = Field(
        None,
        description="The slurm_node role installs rackcert's health check where slurm.conf"
        " names it (HealthCheckProgram); absent: the role leaves the program alone",
    )


class UpgradeHooks(Strict):
    """A site without Slurm names how its scheduler drains, counts jobs on and resumes a node.

    Each is a command line run by `rackcert upgrade` on this machine (no shell), with
    `{node}` and `{reason}` replaced; jobs_command prints the node's running job count.
    With neither Slurm nor these, the roll asks before taking each node out.
    """

    drain_command: list[str] = Field(
        min_length=1, description="argv that drains {node} with {reason}"
    )
    jobs_command: list[str] = Field(
        min_length=1, description="argv that prints how many jobs run on {node}"
    )
    resume_command: list[str] = Field(min_length=1, description="argv that resumes {node}")


class Upgrade(Strict):
    """How `rackcert upgrade` reaches the scheduler where the site runs no Slurm."""

    hooks: UpgradeHooks | None = None
    layers: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="Versions for upgrade layers registered from outside rackcert (layer name"
        ' -> component -> version, docs/upgrade.md "Adding a layer"); rackcert\'s own layers'
        " read their own fields (hosts[].esxi_version, host_software, guest)",
    )


class Certification(Strict):
    reference: str | None = Field(None, description="Certified-matrix entry to compare against")
    scaling_efficiency_min: float = Field(
        0.9, gt=0, le=1.5, description="ResNet50 weak-scaling efficiency vs N x 1 node, at least"
    )
    allreduce_busbw_fraction_min: float = Field(
        0.7, gt=0, le=1.5, description="Allreduce busbw at the largest sizes / line rate, at least"
    )
    resnet50_images_per_gpu_min: float | None = Field(
        None,
        ge=0,
        description="ResNet50 images/s per GPU, at least (absent or 0: not judged, never a pass)",
    )
    line_rate_gbps: float | None = Field(
        None, gt=0, description="Override the link line rate (default: the NIC port speed)"
    )
    links: list[LinkExpectation] = Field(
        default_factory=list,
        description="Expected busbw or line rate per topology, each with its source; first"
        " match wins, before rackcert's shipped figures (validation.bench.links)",
    )
    link_bandwidth_fraction_min: float = Field(
        0.8,
        gt=0,
        le=1,
        description="Localisation: each node pair's measured bandwidth (ib_write_bw, iperf3)"
        " / line rate, at least",
    )
    median_fraction_min: float = Field(
        0.7,
        gt=0,
        le=1,
        description="Localisation: each node's, GPU's and link's figure / the rack's median of"
        " it, at least (below: the part is named in the verdict)",
    )
    required: list[VerdictCheckId] | None = Field(
        None,
        description="Bench checks whose skip makes the verdict INCOMPLETE (default: what the"
        " rack can judge: allreduce.busbw_fraction with 2+ GPUs, resnet50.scaling_efficiency"
        " with 2+ nodes, resnet50.images_per_gpu)",
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
    host_software: HostSoftware = Field(
        default_factory=HostSoftware, description="Software provision installs on the ESXi hosts"
    )
    slurm: Slurm | None = Field(
        None,
        description="The site's Slurm: nodes join it, bench runs as its jobs (--launcher srun)",
    )
    upgrade: Upgrade = Field(
        default_factory=Upgrade,
        description="Scheduler hooks `rackcert upgrade` uses where the site runs no Slurm",
    )

    # Lookups every stage needs; cheap enough to rebuild on each call.
    def profile(self, name: str) -> HardwareProfile:
        return next(p for p in self.hardware_profiles if p.name == name)

    def host(self, name: str) -> Host:
        return next(h for h in self.hosts if h.name == name)

    def template(self, name: str) -> VmTemplate:
        return next(t for t in self.vm_templates if t.name == name)

    def host_profile(self, host_name: str) -> HardwareProfile:
        return self.profile(self.host(host_name).profile)

    def required_checks(self) -> list[str]:
        """certification.required, else what this rack can judge: busbw needs 2+ GPUs in its
        VMs, scaling needs 2+ nodes, images per GPU needs one GPU."""
        if self.certification.required is not None:
            return list(self.certification.required)
        if self.vms:
            gpus = sum(self.template(v.template).gpus for v in self.vms)
            nodes = len(self.vms)
        else:
            gpus = sum(len(self.host_profile(h.name).gpus) for h in self.hosts)
            nodes = len(self.hosts)
        out = ["allreduce.busbw_fraction"] if gpus >= 2 else []
        out += ["resnet50.scaling_efficiency"] if nodes >= 2 else []
        return [*out, "resnet50.images_per_gpu"]

    def line_rate_gbps(self) -> float | None:
        """The link a multi-node allreduce crosses: the override, else the slowest NIC port."""
        if self.certification.line_rate_gbps:
            return self.certification.line_rate_gbps
        speeds = [n.speed_gbps for p in self.hardware_profiles for n in p.nics]
        return float(min(speeds)) if speeds else None
