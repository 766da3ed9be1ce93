"""Read the whole rack from vCenter in one PropertyCollector retrieval.

One ContainerView over the root folder (hosts and VMs), one
RetrievePropertiesEx with a TraversalSpec through the view's `view` property,
followed through its pages (a real vCenter pages large results:
ContinueRetrievePropertiesEx with the token until none is left), and the view
destroyed again: round trips grow with pages only, not with per-host calls
(benchmarks/discovery.py measures it against a naive walk).

Per host it reads model, vendor, ESXi version, PCI devices with vendor/device
ids, the NUMA node of each device (hardware.numaInfo), passthrough state
(config.pciPassthruInfo), the ATS boot option and its declared type (the keyed
paths `config.option["VMkernel.Boot.atsSupport"]` and
`config.optionDef[...]` ask for that one option, not the host's whole list;
absent on a build without it), maintenance and reboot-required state. Per VM:
passthrough devices with their backing ids, extraConfig, reservation,
firmware, power state and the extension that manages it (vCLS).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from rackcert.errors import RackcertError
from rackcert.observed import (
    Inventory,
    ObservedHost,
    ObservedVm,
    PassthroughDevice,
    PciDevice,
    VirtualDisk,
    VirtualNic,
)
from rackcert.vsphere_rules import ATS_OPTION, TRANSIENT_FAULTS, with_retries

ATS_VALUE = f'config.option["{ATS_OPTION}"]'
ATS_DEF = f'config.optionDef["{ATS_OPTION}"]'

HOST_PROPERTIES = [
    "name",
    "summary.hardware",
    "summary.rebootRequired",
    "config.product",
    ATS_VALUE,
    ATS_DEF,
    "config.pciPassthruInfo",
    "config.sharedPassthruGpuTypes",
    "config.graphicsConfig",
    "hardware.pciDevice",
    "hardware.numaInfo",
    "hardware.systemInfo",
    "hardware.biosInfo",  # HostBIOSInfo: biosVersion, releaseDate (certified-matrix BIOS row)
    "runtime.connectionState",
    "runtime.powerState",
    "runtime.inMaintenanceMode",
    "datastore",
    "network",
    "runtime.bootTime",
    "capability.deviceRebindWithoutRebootSupported",
]
VM_PROPERTIES = [
    "name",
    "runtime.host",
    "runtime.powerState",
    "config.firmware",
    "config.guestId",
    "config.version",
    "config.hardware.numCPU",
    "config.hardware.memoryMB",
    "config.hardware.device",
    "config.memoryReservationLockedToMax",
    "config.memoryAllocation",
    "config.extraConfig",
    "config.managedBy",
    "config.template",
    "guest.ipAddress",
]
NAMED = ["name"]  # datastores and networks: their names, for the hosts' lists


class DiscoveryError(RackcertError):
    """vCenter answered discovery with a fault or the connection kept dropping."""


def _u16(value: int | None) -> int:
    """vSphere types PCI ids as xsd:short: 0x8086 arrives as -31610."""
    return (value or 0) & 0xFFFF


def _filter_spec(vim: Any, vmodl: Any, view: Any, extra: dict[Any, list[str]] | None = None) -> Any:
    pc = vmodl.query.PropertyCollector
    traverse = pc.TraversalSpec(name="view", path="view", skip=False, type=vim.view.ContainerView)
    paths = {
        vim.HostSystem: HOST_PROPERTIES,
        vim.VirtualMachine: VM_PROPERTIES,
        vim.Datastore: NAMED,
        vim.Network: NAMED,
    }
    for kind, more in (extra or {}).items():
        paths[kind] = list(dict.fromkeys([*paths.get(kind, []), *more]))
    return pc.FilterSpec(
        objectSet=[pc.ObjectSpec(obj=view, skip=True, selectSet=[traverse])],
        propSet=[pc.PropertySpec(type=kind, pathSet=p) for kind, p in paths.items()],
        reportMissingObjectsInResults=False,
    )


# Objects per page we ask for (RetrieveOptions.maxObjects); vCenter may return fewer
# by its own policy and hands out a token for the rest.
PAGE_OBJECTS = 1000


def _pages(
    pc: Any, spec: Any, options: Any, stats: dict[str, int], take: Callable[[list[Any]], None]
) -> None:
    """One retrieval followed through its continuation tokens, each page handed to `take`
    as it arrives (and then dropped: only one page of SOAP objects is held at a time)."""
    result = pc.RetrievePropertiesEx([spec], options)
    stats["pages"] = 1
    take(list(result.objects) if result else [])
    while result is not None and result.token:
        result = pc.ContinueRetrievePropertiesEx(result.token)
        stats["pages"] += 1
        take(list(result.objects or []))


def _stream_paged(
    si: Any,
    stats: dict[str, int],
    fresh: Callable[[], Callable[[list[Any]], None]],
    extra: dict[Any, list[str]] | None = None,
) -> None:
    """Every host, VM, datastore and network (and `extra`'s types), page by page, through one
    view. A dropped connection restarts the retrieval with a fresh consumer (a token cannot
    be replayed: the page it was answering may already be consumed)."""
    from pyVmomi import vim, vmodl

    content = si.content
    kinds = [vim.HostSystem, vim.VirtualMachine, vim.Datastore, vim.Network]
    kinds += [k for k in (extra or {}) if k not in kinds]
    view = content.viewManager.CreateContainerView(content.rootFolder, kinds, True)
    try:
        pc = content.propertyCollector
        options = vmodl.query.PropertyCollector.RetrieveOptions(maxObjects=PAGE_OBJECTS)
        spec = _filter_spec(vim, vmodl, view, extra)
        with_retries(lambda: _pages(pc, spec, options, stats, fresh()), 3)
    finally:
        with contextlib.suppress(*TRANSIENT_FAULTS):
            view.DestroyView()


def retrieve_all(
    si: Any, stats: dict[str, int] | None = None, extra: dict[Any, list[str]] | None = None
) -> list[Any]:
    """Every host and VM object content: one retrieval, followed through its pages.

    `extra` adds properties (and object types) to the same retrieval: `rackcert capture`
    reads clusters, datacenters and more per host in the one call discovery makes, and
    keeps the SOAP objects (discovery streams them into its models instead).
    """
    objects: list[Any] = []

    def fresh() -> Callable[[list[Any]], None]:
        objects.clear()
        return objects.extend

    _stream_paged(si, {} if stats is None else stats, fresh, extra)
    return objects


class _Collected:
    """What the pages said, converted as each page arrives (rackcert's models, not SOAP
    objects): hosts, VMs with their host's moid, and datastore/network names."""

    def __init__(self) -> None:
        self.hosts: dict[str, tuple[ObservedHost, list[str], list[str]]] = {}
        self.vms: dict[str, tuple[ObservedVm, str | None]] = {}
        self.names: dict[str, str] = {}

    def take(self, objects: list[Any]) -> None:
        from pyVmomi import vim

        for obj in objects:
            moid = obj.obj._moId
            props = {p.name: p.val for p in obj.propSet}
            if isinstance(obj.obj, vim.HostSystem):
                refs = [r._moId for r in props.get("datastore") or []]
                nets = [r._moId for r in props.get("network") or []]
                self.hosts[moid] = (_host(moid, props), refs, nets)
            elif isinstance(obj.obj, vim.VirtualMachine):
                host_ref = props.get("runtime.host")
                self.vms[moid] = (_vm(moid, props), host_ref._moId if host_ref else None)
            elif isinstance(obj.obj, vim.Datastore | vim.Network):
                self.names[moid] = props.get("name", "")


def discover(si: Any) -> Inventory:
    """The rack as vCenter sees it now; `round_trips` counts the SOAP calls it took."""
    from pyVmomi import vmodl

    from provision.roundtrips import count_round_trips

    started = time.perf_counter()
    stats: dict[str, int] = {}
    collected = _Collected()

    def fresh() -> Callable[[list[Any]], None]:
        nonlocal collected
        collected = _Collected()
        return collected.take

    with count_round_trips(si) as counter:
        try:
            about = si.content.about
            _stream_paged(si, stats, fresh)
        except vmodl.MethodFault as exc:
            reason = exc.msg or type(exc).__name__
            raise DiscoveryError(f"vCenter discovery failed: {reason}") from None
        except TRANSIENT_FAULTS as exc:
            raise DiscoveryError(
                f"vCenter discovery failed: the connection dropped ({type(exc).__name__})"
                " three times; check the network and re-run"
            ) from None
    inventory = _inventory(collected, about)
    # ATS as the hosts run it: esxcli only where a reboot is pending (_ats_runtime).
    esxcli_calls = sum(_ats_runtime(si, host) for host in inventory.hosts)
    inventory.round_trips = counter.calls + esxcli_calls
    inventory.pages = stats.get("pages", 0)
    inventory.seconds = round(time.perf_counter() - started, 4)
    return inventory


def inventory_from(objects: list[Any], about: Any) -> Inventory:
    """The Inventory of one retrieval's object contents (capture's, which keeps them)."""
    collected = _Collected()
    collected.take(objects)
    return _inventory(collected, about)


def _inventory(collected: _Collected, about: Any) -> Inventory:
    """Hosts with their datastores, networks and VMs; templates apart; all sorted by name."""
    hosts: list[ObservedHost] = []
    for host, refs, nets in collected.hosts.values():
        host.datastores = sorted(collected.names.get(r, "") for r in refs)
        host.networks = sorted(collected.names.get(r, "") for r in nets)
        hosts.append(host)
    by_moid = {h.moid: h for h in hosts}
    out_vms, templates = [], []
    for vm, host_moid in collected.vms.values():
        host = by_moid.get(host_moid or "")
        if vm.template:
            vm.host = host.name if host else None
            templates.append(vm)
            continue
        if host is not None:
            vm.host = host.name
            host.vm_names.append(vm.name)
        out_vms.append(vm)
    templates.sort(key=lambda v: v.name)
    hosts.sort(key=lambda h: h.name)
    out_vms.sort(key=lambda v: v.name)
    for host in hosts:
        host.vm_names.sort()
    return Inventory(
        vcenter=about.fullName,
        api_version=about.apiVersion,
        hosts=hosts,
        vms=out_vms,
        templates=templates,
    )


def _ats_inferred(host: ObservedHost) -> None:
    """ATS as the host runs it, where the API alone says: with no reboot pending, as configured.

    A boot option runs from the next boot; with no reboot pending (summary.rebootRequired
    false) the host runs what it has configured. With one pending the configured value says
    nothing about the running one (an operator's same-value write and a VIB install set
    rebootRequired too): ats_runtime stays unknown until `_ats_runtime` asks the host.
    """
    if host.ats_enabled is not None and not host.reboot_required:
        host.ats_runtime = host.ats_enabled
        host.ats_runtime_source = "configured (no reboot pending)"


def _ats_runtime(si: Any, host: ObservedHost) -> int:
    """Ask a host with a reboot pending what ATS it runs; the number of SOAP calls it took.

    `esxcli system settings kernel list -o atsSupport` (its Runtime column), only where a
    reboot is pending, so discovery's round trips stay independent of the host count. A
    host that does not answer keeps the API's inference (not in effect until the reboot),
    and the record says so.
    """
    if host.ats_enabled is None or host.ats_runtime is not None:
        return 0
    if host.connection_state != "connected":
        host.ats_runtime_source = f"inferred: host {host.connection_state or 'unreachable'}"
        return 0
    from provision.esxcli import kernel_setting

    row = kernel_setting(si, host.moid, "atsSupport")
    if row is None:
        host.ats_runtime_source = (
            "inferred: the host did not answer esxcli; with a reboot pending the"
            " configured value is taken as not in effect"
        )
        return 2
    host.ats_runtime = row.runtime_on
    host.ats_runtime_source = f"esxcli (Configured {row.configured}, Runtime {row.runtime})"
    return 2


def _host(moid: str, props: dict[str, Any]) -> ObservedHost:
    numa_of: dict[str, int] = {}
    numa = props.get("hardware.numaInfo")
    for node in (numa.numaNode if numa else None) or []:
        for pci in node.pciId or []:
            numa_of[pci] = node.typeId
    passthru = {p.id: p for p in props.get("config.pciPassthruInfo") or []}
    devices = []
    for dev in props.get("hardware.pciDevice") or []:
        info = passthru.get(dev.id)
        devices.append(
            PciDevice(
                id=dev.id,
                vendor_id=_u16(dev.vendorId),
                device_id=_u16(dev.deviceId),
                sub_vendor_id=_u16(dev.subVendorId),
                sub_device_id=_u16(dev.subDeviceId),
                class_id=_u16(dev.classId),
                vendor_name=dev.vendorName or "",
                device_name=dev.deviceName or "",
                parent_bridge=dev.parentBridge or None,
                numa_node=numa_of.get(dev.id),
                passthru_capable=bool(info and info.passthruCapable),
                passthru_enabled=bool(info and info.passthruEnabled),
                passthru_active=bool(info and info.passthruActive),
            )
        )
    ats_value = props.get(ATS_VALUE)
    ats = ats_value.value if ats_value is not None else None
    ats_type = _option_type(props.get(ATS_DEF), ats)
    product = props.get("config.product")
    hardware = props.get("summary.hardware")
    system = props.get("hardware.systemInfo")
    host = ObservedHost(
        name=props.get("name", moid),
        moid=moid,
        address=props.get("name", ""),
        vendor=(system.vendor if system else getattr(hardware, "vendor", "")) or "",
        model=(system.model if system else getattr(hardware, "model", "")) or "",
        esxi_version=getattr(product, "version", "") or "",
        esxi_build=getattr(product, "build", "") or "",
        api_version=getattr(product, "apiVersion", "") or "",
        system_id=getattr(system, "uuid", "") or "",
        connection_state=str(props.get("runtime.connectionState", "")),
        power_state=str(props.get("runtime.powerState", "")),
        in_maintenance=bool(props.get("runtime.inMaintenanceMode", False)),
        reboot_required=bool(props.get("summary.rebootRequired", False)),
        ats_enabled=_truthy(ats) if ats is not None else None,
        ats_option_type=ats_type,
        rebind_without_reboot=bool(props.get("capability.deviceRebindWithoutRebootSupported")),
        boot_time=props.get("runtime.bootTime"),
        graphics_type=getattr(props.get("config.graphicsConfig"), "hostDefaultGraphicsType", "")
        or "",
        numa_nodes=int(getattr(numa, "numNodes", 0) or 0),
        memory_mb=int((getattr(hardware, "memorySize", 0) or 0) // (1024 * 1024)),
        pci_devices=devices,
        vgpu_types=list(props.get("config.sharedPassthruGpuTypes") or []),
        bios_version=getattr(props.get("hardware.biosInfo"), "biosVersion", "") or "",
    )
    _ats_inferred(host)
    return host


def _option_type(definition: Any, value: Any) -> str:
    """bool/string/int/long from the host's OptionDef; "" when the host has no such option."""
    kind = type(getattr(definition, "optionType", None)).__name__.lower()
    for name in ("bool", "string", "long", "int"):
        if name in kind:
            return name
    if value is None:
        return ""
    return "bool" if isinstance(value, bool) else "string" if isinstance(value, str) else "long"


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)


def _vm(moid: str, props: dict[str, Any]) -> ObservedVm:
    from pyVmomi import vim

    devices, disks, nics = [], [], []
    for dev in props.get("config.hardware.device") or []:
        if isinstance(dev, vim.vm.device.VirtualPCIPassthrough):
            devices.append(_passthrough(dev, vim))
        elif isinstance(dev, vim.vm.device.VirtualDisk):
            disks.append(_disk(dev))
        elif isinstance(dev, vim.vm.device.VirtualEthernetCard):
            nics.append(_nic(dev, vim))
    alloc = props.get("config.memoryAllocation")
    extra = {o.key: str(o.value) for o in props.get("config.extraConfig") or []}
    return ObservedVm(
        name=props.get("name", moid),
        moid=moid,
        power_state=str(props.get("runtime.powerState", "")),
        firmware=props.get("config.firmware", "") or "",
        guest_id=props.get("config.guestId", "") or "",
        num_cpus=int(props.get("config.hardware.numCPU", 0) or 0),
        memory_mb=int(props.get("config.hardware.memoryMB", 0) or 0),
        memory_reservation_locked=bool(props.get("config.memoryReservationLockedToMax")),
        memory_reservation_mb=int(getattr(alloc, "reservation", 0) or 0),
        hardware_version=props.get("config.version", "") or "",
        extra_config=extra,
        passthrough=devices,
        managed_by=getattr(props.get("config.managedBy"), "extensionKey", "") or "",
        template=bool(props.get("config.template")),
        disks=disks,
        nics=nics,
        guest_ip=props.get("guest.ipAddress") or "",
    )


def _disk(dev: Any) -> VirtualDisk:
    name = getattr(dev.backing, "fileName", "") or ""
    datastore = name[1 : name.index("]")] if name.startswith("[") and "]" in name else ""
    return VirtualDisk(
        key=dev.key, capacity_gb=round((dev.capacityInKB or 0) / 1024**2, 3), datastore=datastore
    )


def _nic(dev: Any, vim: Any) -> VirtualNic:
    kind = type(dev).__name__.rsplit(".", 1)[-1].removeprefix("Virtual").lower()
    return VirtualNic(key=dev.key, type=kind, network=getattr(dev.backing, "deviceName", "") or "")


def _passthrough(dev: Any, vim: Any) -> PassthroughDevice:
    backing = dev.backing
    label = dev.deviceInfo.label if dev.deviceInfo else ""
    if isinstance(backing, vim.vm.device.VirtualPCIPassthrough.VmiopBackingInfo):
        return PassthroughDevice(key=dev.key, backing="vgpu", vgpu=backing.vgpu, label=label)
    if isinstance(backing, vim.vm.device.VirtualPCIPassthrough.DynamicBackingInfo):
        allowed = (backing.allowedDevice or [None])[0]
        return PassthroughDevice(
            key=dev.key,
            backing="dynamic",
            vendor_id=_u16(allowed.vendorId) if allowed else None,
            device_id=_u16(allowed.deviceId) if allowed else None,
            label=label,
        )
    device_id = getattr(backing, "deviceId", None)
    return PassthroughDevice(
        key=dev.key,
        backing="fixed",
        id=getattr(backing, "id", None),
        vendor_id=_u16(getattr(backing, "vendorId", 0)),
        device_id=int(device_id, 16) if device_id else None,
        system_id=getattr(backing, "systemId", None),
        label=label,
    )
