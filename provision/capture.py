"""Read a vCenter into a capture: discovery's one retrieval, with more properties.

Read-only. The same ContainerView + PropertyCollector retrieval discovery makes
(paged, retried on a dropped connection, TLS as the spec says), asked for more per
host (CPU, BIOS, product, boot time), and for clusters (DRS, HA, rules), datacenters,
datastores and port groups with their hosts. From that one answer come both the
capture and discovery's Inventory, whose provision digest the capture carries. What a
captured host or VM shares with discovery's (rackcert.core.observed's HostState and
VmConfig) is read once, by discovery (provision.objectcontent), and taken from its Inventory;
the capture reads only what is its own (hardware, NUMA, PCI functions and passthrough as the
twin serves them, options, product, devices, extraConfig with redaction, clusters).

One call more per host only where it matters: a host on which a VM holds a fixed
passthrough backing gets its passthrough systemId from QueryConfigTarget (the id
ESXi checks at power-on; it is not hardware.systemInfo.uuid), so the twin can hold
that VM's devices as the real host does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from provision.discovery import (
    ATS_DEF,
    ATS_VALUE,
    DiscoveryError,
    _option_type,
    _u16,
    inventory_from,
    retrieve_all,
    speaks_device_groups,
)
from rackcert.core.capture.digest import inventory_digest
from rackcert.core.capture.model import (
    About,
    AdvancedOption,
    AllowedDevice,
    Capture,
    Cluster,
    ClusterRule,
    Datastore,
    DeviceGroupMember,
    ExtraConfig,
    Host,
    HostDeviceGroup,
    HostHardware,
    ManagedBy,
    Network,
    Numa,
    NumaNode,
    Passthrough,
    PciFunction,
    Product,
    Vm,
    VmDevice,
    VmDeviceGroup,
)
from rackcert.core.capture.redact import SERVED_WITHHELD, WITHHELD, is_secret_key, sha256
from rackcert.core.observed import HostState, Inventory, VmConfig
from rackcert.core.runs import utc_now
from rackcert.core.vsphere_rules import ATS_OPTION, TRANSIENT_FAULTS, with_retries

# Discovery asks for single fields of these; the capture records the whole objects. What the
# two share (rackcert.core.observed's HostState and VmConfig) the capture takes from discovery.
HOST_MORE = [
    "hardware.cpuInfo",
    "hardware.memorySize",
    "parent",
    "summary.hardware",
    "hardware.systemInfo",
]
# config.instanceUuid: apply looks a VM up by it before a clone (provision/vm_identity.py), so
# a rehearsal's twin serves the captured one.
VM_MORE = ["config.instanceUuid"]
CLUSTER = ["name", "host", "configurationEx", "environmentBrowser"]
DATASTORE = ["summary.type"]


def _extra(vim: Any) -> dict[Any, list[str]]:
    return {
        vim.HostSystem: HOST_MORE,
        vim.VirtualMachine: VM_MORE,
        vim.ClusterComputeResource: CLUSTER,
        vim.Datacenter: ["name"],
        vim.Datastore: DATASTORE,
    }


def capture(si: Any) -> tuple[Capture, Inventory]:
    """The vCenter behind `si` as a capture (not anonymized), and discovery's view of it."""
    from pyVmomi import vim, vmodl

    from provision.roundtrips import count_round_trips

    started = time.perf_counter()
    with count_round_trips(si) as counter:
        try:
            about = si.content.about
            objects, collected = retrieve_all(si, {}, _extra(vim))
            inventory = inventory_from(collected, about)
            out = _assemble(si, objects, about, vim, inventory)
        except vmodl.MethodFault as exc:
            raise DiscoveryError(
                f"vCenter capture failed: {getattr(exc, 'msg', None) or type(exc).__name__}"
            ) from None
        except TRANSIENT_FAULTS as exc:
            raise DiscoveryError(
                f"vCenter capture failed: the connection dropped ({type(exc).__name__})"
                " three times; check the network and re-run"
            ) from None
    out.round_trips = counter.calls
    out.seconds = round(time.perf_counter() - started, 4)
    out.inventory_digest = inventory_digest(inventory)
    return out, inventory


def _props(obj: Any) -> dict[str, Any]:
    return {p.name: p.val for p in obj.propSet}


def _assemble(si: Any, objects: list[Any], about: Any, vim: Any, seen: Inventory) -> Capture:
    """The capture of one retrieval. What a host, a VM and a PCI function share with
    discovery's view (HostState, VmConfig: rackcert.core.observed) is taken from `seen`,
    the Inventory discovery read from the same answer, not read a second time."""
    observed: dict[str, BaseModel] = {h.moid: h for h in seen.hosts}
    observed |= {v.moid: v for v in [*seen.vms, *seen.templates]}
    by_kind: dict[str, list[tuple[Any, dict[str, Any]]]] = {}
    for obj in objects:
        by_kind.setdefault(type(obj.obj).__name__.rsplit(".", 1)[-1], []).append(
            (obj.obj, _props(obj))
        )
    names = {ref._moId: props.get("name", "") for kind in by_kind for ref, props in by_kind[kind]}
    clusters = [_cluster(props, names) for _ref, props in by_kind.get("ClusterComputeResource", [])]
    cluster_of = {h: c.name for c in clusters for h in c.hosts}
    hosts = [
        _host(props, cluster_of, _facts(observed[ref._moId], HostState))
        for ref, props in by_kind.get("HostSystem", [])
    ]
    vms = [
        _vm(props, vim, _facts(observed[ref._moId], VmConfig))
        for ref, props in by_kind.get("VirtualMachine", [])
    ]
    _system_ids(si, hosts, vms, by_kind, vim)
    _host_device_groups(si, hosts, by_kind, vim)
    datastores = [
        Datastore(
            name=props.get("name", ""),
            type=str(props.get("summary.type") or ""),
        )
        for _ref, props in by_kind.get("Datastore", [])
    ]
    networks = [
        Network(
            name=props.get("name", ""),
            type=type(ref).__name__.rsplit(".", 1)[-1],
        )
        for kind in ("Network", "DistributedVirtualPortgroup", "OpaqueNetwork")
        for ref, props in by_kind.get(kind, [])
    ]
    datacenters = sorted(props.get("name", "") for _r, props in by_kind.get("Datacenter", []))
    return Capture(
        taken_at=utc_now(),
        about=About(
            name=about.name or "",
            full_name=about.fullName or "",
            vendor=about.vendor or "",
            version=about.version or "",
            build=about.build or "",
            api_type=about.apiType or "",
            api_version=about.apiVersion or "",
            os_type=about.osType or "",
            product_line_id=about.productLineId or "",
        ),
        datacenter=datacenters[0] if datacenters else "",
        clusters=sorted(clusters, key=lambda c: c.name),
        datastores=sorted(datastores, key=lambda d: d.name),
        networks=sorted(networks, key=lambda n: n.name),
        hosts=sorted(hosts, key=lambda h: h.name),
        vms=sorted(vms, key=lambda v: v.name),
    )


def _cluster(props: dict[str, Any], names: dict[str, str]) -> Cluster:
    config = props.get("configurationEx")
    drs = getattr(config, "drsConfig", None)
    das = getattr(config, "dasConfig", None)
    rules = [
        ClusterRule(
            name=rule.name or "",
            # vSphere's type name (pyVmomi says vim.cluster.AntiAffinityRuleSpec)
            type="Cluster" + type(rule).__name__.rsplit(".", 1)[-1].removeprefix("Cluster"),
            enabled=bool(rule.enabled),
        )
        for rule in getattr(config, "rule", None) or []
    ]
    return Cluster(
        name=props.get("name", ""),
        hosts=sorted(names.get(h._moId, "") for h in props.get("host") or []),
        drs_enabled=bool(getattr(drs, "enabled", False)),
        ha_enabled=bool(getattr(das, "enabled", False)),
        rules=sorted(rules, key=lambda r: r.name),
    )


def _facts(model: BaseModel, shared: type[BaseModel]) -> dict[str, Any]:
    """The fields of `shared` (HostState, VmConfig) as `model`, discovery's, holds them."""
    return model.model_dump(include=set(shared.model_fields))


def _host(props: dict[str, Any], cluster_of: dict[str, str], state: dict[str, Any]) -> Host:
    name = state["name"]
    numa = props.get("hardware.numaInfo")
    system = props.get("hardware.systemInfo")
    bios = props.get("hardware.biosInfo")
    cpu = props.get("hardware.cpuInfo")
    summary = props.get("summary.hardware")
    product = props.get("config.product")
    ats = props.get(ATS_VALUE)
    options = []
    if ats is not None:
        kind = _option_type(props.get(ATS_DEF), ats.value) or "string"
        options.append(AdvancedOption(key=ATS_OPTION, value=ats.value, type=kind))  # type: ignore[arg-type]
    return Host(
        **state,
        cluster=cluster_of.get(name, ""),
        hardware=HostHardware(
            vendor=getattr(system, "vendor", "") or "",
            model=getattr(system, "model", "") or "",
            uuid=getattr(system, "uuid", "") or "",
            bios_version=getattr(bios, "biosVersion", "") or "",
            bios_release_date=getattr(bios, "releaseDate", None),
            cpu_model=getattr(summary, "cpuModel", "") or "",
            cpu_packages=int(getattr(cpu, "numCpuPackages", 0) or 0),
            cpu_cores=int(getattr(cpu, "numCpuCores", 0) or 0),
            cpu_threads=int(getattr(cpu, "numCpuThreads", 0) or 0),
            cpu_hz=int(getattr(cpu, "hz", 0) or 0),
            memory_bytes=int(props.get("hardware.memorySize") or 0),
        ),
        numa=Numa(
            type=getattr(numa, "type", "") or "",
            nodes=[
                NumaNode(
                    id=node.typeId,
                    memory_begin=int(node.memoryRangeBegin or 0),
                    memory_length=int(node.memoryRangeLength or 0),
                    pci=list(node.pciId or []),
                )
                for node in (getattr(numa, "numaNode", None) or [])
            ],
        ),
        pci_devices=[
            PciFunction(
                id=d.id,
                class_id=_u16(d.classId),
                vendor_id=_u16(d.vendorId),
                device_id=_u16(d.deviceId),
                sub_vendor_id=_u16(d.subVendorId),
                sub_device_id=_u16(d.subDeviceId),
                vendor_name=d.vendorName or "",
                device_name=d.deviceName or "",
                parent_bridge=d.parentBridge or "",
            )
            for d in props.get("hardware.pciDevice") or []
        ],
        passthrough=[
            Passthrough(
                id=p.id,
                dependent_device=p.dependentDevice or "",
                capable=bool(p.passthruCapable),
                enabled=bool(p.passthruEnabled),
                active=bool(p.passthruActive),
            )
            for p in props.get("config.pciPassthruInfo") or []
        ],
        options=options,
        product=Product(
            name=getattr(product, "name", "") or "",
            full_name=getattr(product, "fullName", "") or "",
            version=getattr(product, "version", "") or "",
            build=getattr(product, "build", "") or "",
            api_version=getattr(product, "apiVersion", "") or "",
        ),
    )


def _vm(props: dict[str, Any], vim: Any, config: dict[str, Any]) -> Vm:
    managed = props.get("config.managedBy")
    return Vm(
        **config,
        instance_uuid=props.get("config.instanceUuid") or "",
        managed_by=ManagedBy(extension_key=managed.extensionKey or "", type=managed.type or "")
        if managed is not None
        else None,
        extra_config=sorted(
            (_extra_config(o.key, str(o.value)) for o in props.get("config.extraConfig") or []),
            key=lambda e: e.key,
        ),
        devices=[
            d for d in (_device(dev, vim) for dev in props.get("config.hardware.device") or []) if d
        ],
        device_groups=[
            VmDeviceGroup(key=g.groupInstanceKey, name=getattr(g, "deviceGroupName", "") or "")
            for g in getattr(props.get("config.deviceGroups"), "deviceGroup", None) or []
        ],
    )


def _grouped(dev: Any) -> dict[str, Any]:
    """deviceGroupInfo of a device that belongs to a vendor device group (vSphere 8)."""
    info = getattr(dev, "deviceGroupInfo", None)
    if info is None:
        return {}
    return {"group_key": info.groupInstanceKey, "group_sequence": info.sequenceId}


def _extra_config(key: str, value: str) -> ExtraConfig:
    if is_secret_key(key):
        # A twin serving a capture serves a withheld value as its marker: keep its digest.
        served = SERVED_WITHHELD.fullmatch(value)
        digest = served.group(1) if served else sha256(value)
        return ExtraConfig(key=key, value=WITHHELD, redacted=True, sha256=digest)
    return ExtraConfig(key=key, value=value)


def _device(dev: Any, vim: Any) -> VmDevice | None:
    label = dev.deviceInfo.label if dev.deviceInfo else ""
    backing = dev.backing
    if isinstance(dev, vim.vm.device.VirtualDisk):
        name = getattr(backing, "fileName", "") or ""
        store = name[1 : name.index("]")] if name.startswith("[") and "]" in name else ""
        return VmDevice(
            kind="disk", label=label, capacity_kb=dev.capacityInKB or 0, datastore=store
        )
    if isinstance(dev, vim.vm.device.VirtualEthernetCard):
        adapter = type(dev).__name__.rsplit(".", 1)[-1].removeprefix("Virtual").lower()
        network = getattr(backing, "deviceName", "") or ""
        return VmDevice(kind="nic", label=label, adapter=adapter, network=network)
    if not isinstance(dev, vim.vm.device.VirtualPCIPassthrough):
        return None
    if isinstance(backing, vim.vm.device.VirtualPCIPassthrough.VmiopBackingInfo):
        return VmDevice(
            kind="pci_passthrough", label=label, backing="vgpu", vgpu=backing.vgpu, **_grouped(dev)
        )
    if isinstance(backing, vim.vm.device.VirtualPCIPassthrough.DynamicBackingInfo):
        allowed = [
            AllowedDevice(vendor_id=_u16(a.vendorId), device_id=_u16(a.deviceId))
            for a in backing.allowedDevice or []
        ]
        return VmDevice(kind="pci_passthrough", label=label, backing="dynamic", allowed=allowed)
    return VmDevice(
        kind="pci_passthrough",
        label=label,
        backing="fixed",
        id=getattr(backing, "id", None),
        device_id=getattr(backing, "deviceId", None),
        vendor_id=_u16(getattr(backing, "vendorId", 0)),
        system_id=getattr(backing, "systemId", None),
        **_grouped(dev),
    )


def _system_ids(
    si: Any, hosts: list[Host], vms: list[Vm], by_kind: dict[str, Any], vim: Any
) -> None:
    """QueryConfigTarget for each host on which a VM holds a fixed passthrough backing."""
    wanted = {vm.host for vm in vms if vm.host and any(d.backing == "fixed" for d in vm.devices)}
    if not wanted:
        return
    browser_of: dict[str, Any] = {}
    for _ref, props in by_kind.get("ClusterComputeResource", []):
        for h in props.get("host") or []:
            browser_of[h._moId] = props.get("environmentBrowser")
    refs = {props.get("name"): ref for ref, props in by_kind.get("HostSystem", [])}
    for host in hosts:
        ref = refs.get(host.name)
        browser = browser_of.get(ref._moId) if ref is not None else None
        if host.name not in wanted or browser is None:
            continue
        target = with_retries(_config_target(browser, ref), 3)
        ids = {p.systemId for p in (target.pciPassthrough or []) if getattr(p, "systemId", None)}
        host.passthrough_system_id = sorted(ids)[0] if ids else ""


def _host_device_groups(si: Any, hosts: list[Host], by_kind: dict[str, Any], vim: Any) -> None:
    """Each host's vendor device groups (RetrieveVendorDeviceGroupInfo), where the vCenter
    speaks API 8.0.0.1+ and the host has a HostAssignableHardwareManager."""
    if not speaks_device_groups(si):
        return
    refs = {props.get("name"): ref for ref, props in by_kind.get("HostSystem", [])}
    passthrough = vim.vm.device.VirtualPCIPassthrough
    for host in hosts:
        ref = refs.get(host.name)
        manager = getattr(getattr(ref, "configManager", None), "assignableHardwareManager", None)
        if manager is None:
            continue
        groups = with_retries(_vendor_groups(manager), 3) or []
        for g in groups:
            members = []
            for c in g.componentDeviceInfo or []:
                backing = getattr(c.device, "backing", None)
                vgpu = isinstance(backing, passthrough.VmiopBackingInfo)
                members.append(
                    DeviceGroupMember(
                        type=c.type or "",
                        device_name=c.deviceName or "",
                        backing="vgpu" if vgpu else "fixed",
                        id=None if vgpu else getattr(backing, "id", None),
                        vgpu=getattr(backing, "vgpu", None) if vgpu else None,
                    )
                )
            host.device_groups.append(
                HostDeviceGroup(
                    name=g.deviceGroupName,
                    description=g.deviceGroupDescription or "",
                    members=members,
                )
            )


def _vendor_groups(manager: Any) -> Callable[[], Any]:
    """One RetrieveVendorDeviceGroupInfo, as a call with_retries may repeat (it reads only)."""
    return lambda: manager.RetrieveVendorDeviceGroupInfo()


def _config_target(browser: Any, host: Any) -> Callable[[], Any]:
    """One QueryConfigTarget for `host`, as a call with_retries may repeat (it reads only)."""
    return lambda: browser.QueryConfigTarget(host=host)
