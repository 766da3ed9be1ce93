"""The capture file's models: version 1 of `rackcert-capture`, published as
schemas/capture.schema.json (`rackcert capture --schema` prints it).

Names, not managed-object ids, tie things together (a VM's `host`, a cluster's
`hosts`): ids differ between a vCenter and its twin, names do not. Lists are
sorted by name, so two captures of the same inventory are equal as text, apart
from `taken_at` and the hosts' `boot_time` (see `comparable`).

A host, a VM and a PCI function are the observed model's (rackcert.core.observed:
`HostState`, `VmConfig`, `PciIds`, the model of record for what vCenter says about
them), plus what the twin needs to serve them back: names instead of ids, the raw
hardware, options and devices.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rackcert.core.errors import InputError
from rackcert.core.observed import HostState, PciIds, VmConfig

CAPTURE_FORMAT: Final = "rackcert-capture"
CAPTURE_VERSION: Final = 1
MAX_CAPTURE_BYTES = 512 * 1024 * 1024  # a 2,500-host vCenter is tens of MB


class CModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class About(CModel):
    """ServiceContent.about: what the twin answers as its own about."""

    name: str = ""
    full_name: str = ""
    vendor: str = ""
    version: str = ""
    build: str = ""
    api_type: str = ""
    api_version: str = ""
    os_type: str = ""
    product_line_id: str = ""


class ClusterRule(CModel):
    name: str
    type: str = Field(description="The rule's vSphere type (ClusterAffinityRuleSpec, ...)")
    enabled: bool = True


class Cluster(CModel):
    name: str
    hosts: list[str] = Field(default_factory=list)
    drs_enabled: bool = False
    ha_enabled: bool = False
    rules: list[ClusterRule] = Field(default_factory=list, description="DRS rules")


class Datastore(CModel):
    """A datastore; which hosts mount it is in each host's `datastores`."""

    name: str
    type: str = Field("", description="summary.type: VMFS, NFS, NFS41, vsan, vvol, ...")


class Network(CModel):
    """A port group; which hosts have it is in each host's `networks`."""

    name: str
    type: str = Field("Network", description="Network, DistributedVirtualPortgroup, ...")


class HostHardware(CModel):
    vendor: str = ""
    model: str = ""
    uuid: str = Field("", description="hardware.systemInfo.uuid (the BIOS UUID)")
    bios_version: str = ""
    bios_release_date: datetime | None = None
    cpu_model: str = ""
    cpu_packages: int = 0
    cpu_cores: int = 0
    cpu_threads: int = 0
    cpu_hz: int = 0
    memory_bytes: int = 0


class NumaNode(CModel):
    id: int
    memory_begin: int = 0
    memory_length: int = 0
    pci: list[str] = Field(default_factory=list, description="PCI ids on this node")


class Numa(CModel):
    type: str = ""
    nodes: list[NumaNode] = Field(default_factory=list)


class PciFunction(CModel, PciIds):
    """hardware.pciDevice[]: ids as unsigned integers (the API sends xsd:short)."""

    vendor_id: int = 0
    device_id: int = 0
    parent_bridge: str = ""


class Passthrough(CModel):
    """config.pciPassthruInfo[]."""

    id: str
    dependent_device: str = ""
    capable: bool = False
    enabled: bool = False
    active: bool = False


class AdvancedOption(CModel):
    """One advanced option rackcert reads, with the type its OptionDef declares."""

    key: str
    value: bool | int | str
    type: Literal["bool", "string", "int", "long"]


class Product(CModel):
    name: str = ""
    full_name: str = ""
    version: str = ""
    build: str = ""
    api_version: str = ""


class DeviceGroupMember(CModel):
    """One component of a vendor device group (VirtualMachineVendorDeviceGroupInfo
    .componentDeviceInfo): its type, device name and the backing a VM's device gets."""

    type: str = ""
    device_name: str = ""
    backing: Literal["fixed", "vgpu"] | None = None
    id: str | None = Field(None, description="Fixed backing's PCI id")
    vgpu: str | None = None


class HostDeviceGroup(CModel):
    """A vendor device group the host lists (vSphere 8, RetrieveVendorDeviceGroupInfo)."""

    name: str
    description: str = ""
    members: list[DeviceGroupMember] = Field(default_factory=list)


class Host(CModel, HostState):
    cluster: str = ""
    hardware: HostHardware = Field(default_factory=HostHardware)
    numa: Numa = Field(default_factory=Numa)
    pci_devices: list[PciFunction] = Field(default_factory=list)
    passthrough: list[Passthrough] = Field(default_factory=list)
    passthrough_system_id: str = Field(
        "",
        description="The systemId QueryConfigTarget gives this host's passthrough devices;"
        " read only where a VM on the host holds a fixed passthrough backing",
    )
    options: list[AdvancedOption] = Field(
        default_factory=list,
        description="VMkernel.Boot.atsSupport when the build has it; [] when it has not",
    )
    product: Product = Field(default_factory=Product)
    device_groups: list[HostDeviceGroup] = Field(
        default_factory=list, description="Vendor device groups (read from an API 8.0.0.1+ vCenter)"
    )


class ManagedBy(CModel):
    extension_key: str
    type: str = ""


class AllowedDevice(CModel):
    vendor_id: int
    device_id: int


class VmDevice(CModel):
    """The devices rackcert reads: disks, network adapters and PCI passthrough."""

    kind: Literal["disk", "nic", "pci_passthrough"]
    label: str = ""
    capacity_kb: int | None = None
    datastore: str | None = None
    adapter: str | None = Field(None, description="NIC type: vmxnet3, e1000e, ...")
    network: str | None = None
    backing: Literal["fixed", "dynamic", "vgpu"] | None = None
    id: str | None = None
    device_id: str | None = Field(None, description="Fixed backing's deviceId (hex string)")
    vendor_id: int | None = None
    system_id: str | None = None
    vgpu: str | None = None
    allowed: list[AllowedDevice] = Field(default_factory=list)
    group_key: int | None = Field(None, description="deviceGroupInfo.groupInstanceKey")
    group_sequence: int | None = Field(None, description="deviceGroupInfo.sequenceId")


class VmDeviceGroup(CModel):
    """A device group the VM holds (config.deviceGroups): its instance key and name."""

    key: int
    name: str


class ExtraConfig(CModel):
    key: str
    value: str = ""
    redacted: bool = Field(False, description="The value was withheld; sha256 names it")
    sha256: str | None = None


class Vm(CModel, VmConfig):
    instance_uuid: str = Field(
        "",
        description="config.instanceUuid: how provision finds a VM it made under another name"
        " (provision/vm_identity.py); empty in an anonymized capture",
    )
    managed_by: ManagedBy | None = None
    extra_config: list[ExtraConfig] = Field(default_factory=list)
    devices: list[VmDevice] = Field(default_factory=list)
    device_groups: list[VmDeviceGroup] = Field(default_factory=list)


class Capture(CModel):
    """One vCenter as read at `taken_at`; no secret in it (see rackcert/core/capture/redact.py)."""

    format: Literal["rackcert-capture"] = CAPTURE_FORMAT
    version: Literal[1] = CAPTURE_VERSION
    taken_at: str = Field(description="UTC, ISO 8601, when the retrieval finished")
    anonymized: bool = False
    inventory_digest: str = Field(
        "",
        description="sha256 of the fields provision reads (rackcert/core/capture/digest.py), of"
        " the vCenter as read; `provision --rehearsed` compares it with the live one",
    )
    round_trips: int = 0
    seconds: float = 0.0
    about: About = Field(default_factory=About)
    datacenter: str = ""
    clusters: list[Cluster] = Field(default_factory=list)
    datastores: list[Datastore] = Field(default_factory=list)
    networks: list[Network] = Field(default_factory=list)
    hosts: list[Host] = Field(default_factory=list)
    vms: list[Vm] = Field(default_factory=list, description="VMs, templates and vCLS agents")

    def host(self, name: str) -> Host | None:
        return next((h for h in self.hosts if h.name == name), None)

    def vm(self, name: str) -> Vm | None:
        return next((v for v in self.vms if v.name == name), None)

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=1, sort_keys=False) + "\n"


VOLATILE = ("taken_at", "round_trips", "seconds")


def comparable(capture: Capture) -> dict[str, Any]:
    """The capture without what changes from one reading to the next: when it was taken,
    how long it took, and the hosts' boot times."""
    data = capture.model_dump(mode="json")
    for key in VOLATILE:
        data.pop(key, None)
    for host in data["hosts"]:
        host.pop("boot_time", None)
    return data


def load_capture(path: Path) -> Capture:
    """A capture file, or one InputError line saying what is wrong with it."""
    try:
        size = path.stat().st_size
        if size > MAX_CAPTURE_BYTES:
            raise InputError(f"{path}: {size} bytes is too big for a capture")
        raw = json.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"{path}: cannot read the capture: {exc.strerror}") from None
    except ValueError as exc:
        raise InputError(f"{path}: not JSON: {exc}") from None
    if not isinstance(raw, dict) or raw.get("format") != CAPTURE_FORMAT:
        raise InputError(f"{path}: not a rackcert capture (format is not {CAPTURE_FORMAT!r})")
    if raw.get("version") != CAPTURE_VERSION:
        raise InputError(
            f"{path}: capture version {raw.get('version')!r}; this rackcert reads version"
            f" {CAPTURE_VERSION}"
        )
    try:
        return Capture.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise InputError(f"{path}: {where}: {err['msg']}") from None


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a capture, as checked in under schemas/capture.schema.json."""
    schema = Capture.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "rackcert:schemas/capture.schema.json"
    return schema
