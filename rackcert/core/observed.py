"""What provision's discovery saw in vCenter: the contract between stages.

`provision` produces an `Inventory`; `validation` (hypervisor checks), the
report and `spec discover` read it from `provision.json`. It lives in the
spine so that provision and validation never import each other.

Ids are as vSphere reports them, made readable: PCI vendor/device ids as
unsigned integers (the API types them as signed 16-bit), PCI addresses in
the long form 0000:bb:dd.f.

The model of record for vCenter's objects. A capture (rackcert.core.capture.model:
a recorded snapshot the twin replays) describes the same hosts, VMs and PCI
functions, so its models are built on the facts declared here (`PciIds`,
`HostState`, `VmConfig`): one name, type and meaning per vSphere property, whether
a live read or a replayed file says it. Each side adds only what is its own: the
observed side the managed-object ids and what provision derives; the capture
side what the twin needs to serve the objects back.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import AliasChoices, BaseModel, ConfigDict, Field


class Observed(BaseModel):
    model_config = ConfigDict(extra="allow")


# -- the facts both a live read and a capture hold (no model_config: each side keeps its own)
class PciIds(BaseModel):
    """hardware.pciDevice[]: one PCI function's address and ids (unsigned; the API sends
    xsd:short)."""

    id: str = Field(description="PCI address as vSphere reports it, 0000:bb:dd.f")
    class_id: int = 0
    sub_vendor_id: int = 0
    sub_device_id: int = 0
    vendor_name: str = ""
    device_name: str = ""


class HostState(BaseModel):
    """A host's state as vCenter reports it (HostSystem runtime, summary and config)."""

    name: str
    connection_state: str = Field("", description="runtime.connectionState")
    power_state: str = Field("", description="runtime.powerState")
    in_maintenance: bool = Field(False, description="runtime.inMaintenanceMode")
    reboot_required: bool = Field(False, description="summary.rebootRequired: pending boot options")
    rebind_without_reboot: bool = Field(
        False,
        description="HostCapability.deviceRebindWithoutRebootSupported (7.0+): passthrough"
        " changes apply without a reboot",
    )
    boot_time: datetime | None = Field(None, description="runtime.bootTime")
    graphics_type: str = Field(
        "", description="config.graphicsConfig.hostDefaultGraphicsType (vGPU needs sharedDirect)"
    )
    vgpu_types: list[str] = Field(
        default_factory=list, description="config.sharedPassthruGpuTypes (vGPU profiles)"
    )
    datastores: list[str] = Field(default_factory=list, description="Datastores the host mounts")
    networks: list[str] = Field(default_factory=list, description="Port groups on the host")


class VmConfig(BaseModel):
    """A VM's configuration as vCenter reports it (VirtualMachine config and runtime)."""

    name: str
    host: str | None = Field(None, description="The host it runs on (runtime.host), by name")
    template: bool = Field(False, description="config.template: a template, not a VM")
    power_state: str = Field("", description="runtime.powerState")
    guest_id: str = Field("", description="config.guestId")
    hardware_version: str = Field("", description="config.version (vmx-NN)")
    firmware: str = Field("", description="config.firmware: bios or efi")
    # config.hardware.numCPU; captures written before the one name said `cpus`.
    num_cpus: int = Field(
        0,
        validation_alias=AliasChoices("num_cpus", "cpus"),
        description="config.hardware.numCPU",
    )
    memory_mb: int = Field(0, description="config.hardware.memoryMB")
    memory_reservation_locked: bool = Field(
        False, description="config.memoryReservationLockedToMax"
    )
    memory_reservation_mb: int = Field(0, description="config.memoryAllocation.reservation")


class PciDevice(Observed, PciIds):
    vendor_id: int
    device_id: int
    parent_bridge: str | None = None
    numa_node: int | None = Field(None, description="From hardware.numaInfo.numaNode[].pciId")
    passthru_capable: bool = False
    passthru_enabled: bool = Field(False, description="Configured (config.pciPassthruInfo)")
    passthru_active: bool = Field(False, description="In effect since the last boot")


class EsxcliVib(Observed):
    """One row of `esxcli software vib list`."""

    name: str
    version: str = ""
    vendor: str = ""


class EsxcliDevice(Observed):
    """One row of `esxcli storage core device vaai status get`."""

    device: str
    ats_status: str = Field("", description="supported, unsupported or unknown")


class EsxcliHost(Observed):
    """What the host itself answered through esxcli (over the API, through vCenter).

    Operators trust esxcli for what the API does not show, or shows only indirectly: the
    image's build and VIBs, VAAI hardware acceleration per device, passthrough as the
    VMkernel configured it. `answered` False: the host did not answer esxcli (`error` says
    why); every fact is then unknown, never taken as good.
    """

    answered: bool = False
    error: str = ""
    build: str = Field("", description="`system version get` Build (Releasebuild-NNN)")
    version: str = ""
    vibs: list[EsxcliVib] = Field(default_factory=list)
    vaai: list[EsxcliDevice] = Field(default_factory=list)
    passthru: dict[str, bool] = Field(
        default_factory=dict, description="`hardware pci pcipassthru list`: PCI id -> Enabled"
    )

    def vgpu_manager(self) -> EsxcliVib | None:
        """The NVIDIA vGPU manager's VIB among the host's, if it lists one.

        NVIDIA's vGPU User Guide finds it with `esxcli software vib list | grep -i nvd`: vendor
        NVD, a host driver VIB (NVD-AIE_ESXi_7.0.2_Driver, NVD-AIE-800_ESXi_8.0.0_Driver);
        its version starts with the Virtual GPU Manager's (550.127.06-1OEM.800...).
        """
        nvd = [v for v in self.vibs if v.vendor.upper() == "NVD"]
        return next((v for v in nvd if "driver" in v.name.lower()), None)


class ObservedHost(Observed, HostState):
    moid: str
    address: str = ""
    vendor: str = ""
    model: str = ""
    esxi_version: str = ""
    esxi_build: str = ""
    api_version: str = ""
    system_id: str = Field("", description="hardware.systemInfo.uuid")
    ats_enabled: bool | None = Field(
        None, description="ATS setting as configured (VMkernel.Boot.atsSupport); None: not seen"
    )
    ats_runtime: bool | None = Field(
        None,
        description="ATS in effect now (esxcli `system settings kernel list -o atsSupport`,"
        " Runtime); None: not known (no esxcli answer while a reboot is pending)",
    )
    ats_runtime_source: str = Field(
        "",
        description="Where ats_runtime comes from: esxcli; configured (no reboot pending);"
        " or why it is inferred",
    )
    ats_option_type: str | None = Field(
        None,
        description="Declared type of VMkernel.Boot.atsSupport on this host (bool, string, ...);"
        " empty: the ESXi build has no such option; None: not read",
    )
    numa_nodes: int = 0
    memory_mb: int = 0
    pci_devices: list[PciDevice] = Field(default_factory=list)
    vm_names: list[str] = Field(default_factory=list)
    esxcli: EsxcliHost | None = Field(
        None, description="What the host answered through esxcli; None: not asked"
    )

    def device(self, pci: str) -> PciDevice | None:
        return next((d for d in self.pci_devices if d.id == pci), None)


class PassthroughDevice(Observed):
    key: int = 0
    backing: str = Field(description="fixed, dynamic or vgpu")
    id: str | None = None
    vendor_id: int | None = None
    device_id: int | None = None
    system_id: str | None = None
    vgpu: str | None = None
    label: str = ""
    group_key: int | None = Field(
        None, description="deviceGroupInfo.groupInstanceKey: the device group it belongs to"
    )
    group_sequence: int | None = Field(None, description="deviceGroupInfo.sequenceId")


class VirtualDisk(Observed):
    key: int
    capacity_gb: float = Field(description="capacityInKB / 1024^2")
    datastore: str = Field("", description="From the backing's file name, [datastore] path")


class VirtualNic(Observed):
    key: int
    type: str = Field(description="vmxnet3, e1000e, ...")
    network: str = Field("", description="Port group (backing.deviceName)")


class ObservedVm(Observed, VmConfig):
    moid: str
    extra_config: dict[str, str] = Field(default_factory=dict)
    passthrough: list[PassthroughDevice] = Field(default_factory=list)
    managed_by: str = Field(
        "",
        description="config.managedBy.extensionKey: a VM an extension runs (vCLS agents:"
        " com.vmware.vim.eam), never workload",
    )
    disks: list[VirtualDisk] = Field(default_factory=list)
    nics: list[VirtualNic] = Field(default_factory=list)
    guest_ip: str = Field("", description="guest.ipAddress as VMware Tools reports it")
    device_groups: dict[int, str] = Field(
        default_factory=dict,
        description="config.deviceGroups (vSphere 8): groupInstanceKey -> vendor device group name",
    )

    def group_members(self, name: str) -> list[PassthroughDevice]:
        """The VM's devices in its device group `name`, in sequence order."""
        keys = {k for k, n in self.device_groups.items() if n == name}
        found = [d for d in self.passthrough if d.group_key in keys]
        return sorted(found, key=lambda d: d.group_sequence or 0)


class Inventory(Observed):
    vcenter: str = ""
    api_version: str = ""
    hosts: list[ObservedHost] = Field(default_factory=list)
    vms: list[ObservedVm] = Field(default_factory=list)
    templates: list[ObservedVm] = Field(
        default_factory=list, description="VMs marked as templates (clone sources), not workload"
    )
    round_trips: int = Field(
        0, description="SOAP calls discovery needed (grows with result pages, not with hosts)"
    )
    pages: int = Field(0, description="RetrievePropertiesEx result pages (vCenter pages them)")
    seconds: float = 0.0

    def host(self, name: str) -> ObservedHost | None:
        return next((h for h in self.hosts if h.name == name), None)

    def vm(self, name: str) -> ObservedVm | None:
        return next((v for v in self.vms if v.name == name), None)

    def template(self, name: str) -> ObservedVm | None:
        return next((t for t in self.templates if t.name == name), None)
