"""Discovery reads vCenter's XML itself (provision.soapstream, provision.objectcontent).

The oracle is pyVmomi: the same answer deserialized into pyVmomi's objects (capture
keeps both) and read the way discovery read them before it parsed the XML itself, with
the whole data objects rather than the single fields discovery now asks for.
"""

from __future__ import annotations

from typing import Any

import pytest

from provision import soapstream
from provision.discovery import DiscoveryError, discover, retrieve_all
from rackcert.core.observed import ObservedHost, ObservedVm

R750 = "inventories/r750xa-4node.yaml"
WIDE_HOST = ["summary.hardware", "hardware.systemInfo", "config.graphicsConfig"]
ASSEMBLED = {"vm_names", "datastores", "networks", "ats_runtime", "ats_runtime_source", "host"}


def _u16(value: int | None) -> int:
    return (value or 0) & 0xFFFF


def _oracle_host(props: dict[str, Any]) -> dict[str, Any]:
    """What discovery read from pyVmomi's HostSystem objects (whole data objects)."""
    numa = props.get("hardware.numaInfo")
    numa_of = {pci: n.typeId for n in numa.numaNode or [] for pci in n.pciId or []}
    passthru = {p.id: p for p in props.get("config.pciPassthruInfo") or []}
    devices = []
    for dev in props.get("hardware.pciDevice") or []:
        info = passthru.get(dev.id)
        devices.append(
            {
                "id": dev.id,
                "vendor_id": _u16(dev.vendorId),
                "device_id": _u16(dev.deviceId),
                "sub_vendor_id": _u16(dev.subVendorId),
                "sub_device_id": _u16(dev.subDeviceId),
                "class_id": _u16(dev.classId),
                "vendor_name": dev.vendorName or "",
                "device_name": dev.deviceName or "",
                "parent_bridge": dev.parentBridge or None,
                "numa_node": numa_of.get(dev.id),
                "passthru_capable": bool(info and info.passthruCapable),
                "passthru_enabled": bool(info and info.passthruEnabled),
                "passthru_active": bool(info and info.passthruActive),
            }
        )
    option = props.get('config.option["VMkernel.Boot.atsSupport"]')
    definition = props.get('config.optionDef["VMkernel.Boot.atsSupport"]')
    system, hardware = props.get("hardware.systemInfo"), props.get("summary.hardware")
    product = props.get("config.product")
    return {
        "name": props["name"],
        "vendor": system.vendor,
        "model": system.model,
        "system_id": system.uuid,
        "memory_mb": hardware.memorySize // (1024 * 1024),
        "esxi_version": product.version,
        "esxi_build": product.build,
        "api_version": product.apiVersion,
        "connection_state": str(props["runtime.connectionState"]),
        "power_state": str(props["runtime.powerState"]),
        "in_maintenance": props["runtime.inMaintenanceMode"],
        "reboot_required": props["summary.rebootRequired"],
        "ats_enabled": option.value,
        "ats_option_type": type(definition.optionType).__name__.rsplit(".")[-1],
        "boot_time": props["runtime.bootTime"],
        "graphics_type": props["config.graphicsConfig"].hostDefaultGraphicsType,
        "numa_nodes": numa.numNodes,
        "pci_devices": devices,
        "vgpu_types": list(props.get("config.sharedPassthruGpuTypes") or []),
        "bios_version": props["hardware.biosInfo"].biosVersion,
        "rebind_without_reboot": bool(props.get("capability.deviceRebindWithoutRebootSupported")),
    }


def _oracle_vm(props: dict[str, Any]) -> dict[str, Any]:
    """What discovery read from pyVmomi's VirtualMachine objects."""
    from pyVmomi import vim

    device = vim.vm.device
    passthrough, disks, nics = [], [], []
    for dev in props.get("config.hardware.device") or []:
        if isinstance(dev, device.VirtualPCIPassthrough):
            backing = dev.backing
            entry = {"key": dev.key, "label": dev.deviceInfo.label if dev.deviceInfo else ""}
            if isinstance(backing, device.VirtualPCIPassthrough.VmiopBackingInfo):
                entry.update(backing="vgpu", vgpu=backing.vgpu)
            elif isinstance(backing, device.VirtualPCIPassthrough.DynamicBackingInfo):
                allowed = backing.allowedDevice[0]
                entry.update(
                    backing="dynamic",
                    vendor_id=_u16(allowed.vendorId),
                    device_id=_u16(allowed.deviceId),
                )
            else:
                entry.update(
                    backing="fixed",
                    id=backing.id,
                    vendor_id=_u16(backing.vendorId),
                    device_id=int(backing.deviceId, 16),
                    system_id=backing.systemId,
                )
            passthrough.append(entry)
        elif isinstance(dev, device.VirtualDisk):
            name = dev.backing.fileName
            disks.append(
                {
                    "key": dev.key,
                    "capacity_gb": round(dev.capacityInKB / 1024**2, 3),
                    "datastore": name[1 : name.index("]")],
                }
            )
        elif isinstance(dev, device.VirtualEthernetCard):
            kind = type(dev).__name__.rsplit(".", 1)[-1].removeprefix("Virtual").lower()
            nics.append({"key": dev.key, "type": kind, "network": dev.backing.deviceName})
    managed = props.get("config.managedBy")
    return {
        "name": props["name"],
        "power_state": str(props["runtime.powerState"]),
        "firmware": props["config.firmware"],
        "guest_id": props["config.guestId"],
        "num_cpus": props["config.hardware.numCPU"],
        "memory_mb": props["config.hardware.memoryMB"],
        "memory_reservation_locked": bool(props.get("config.memoryReservationLockedToMax")),
        "memory_reservation_mb": props["config.memoryAllocation"].reservation or 0,
        "hardware_version": props["config.version"],
        "extra_config": {o.key: str(o.value) for o in props.get("config.extraConfig") or []},
        "managed_by": managed.extensionKey if managed else "",
        "template": bool(props.get("config.template")),
        "guest_ip": props.get("guest.ipAddress") or "",
        "passthrough": passthrough,
        "disks": disks,
        "nics": nics,
    }


def _ours(model: ObservedHost | ObservedVm, oracle: dict[str, Any]) -> dict[str, Any]:
    """The model's fields the oracle states, in the oracle's shape."""
    dumped = model.model_dump(exclude=ASSEMBLED)
    if isinstance(model, ObservedHost):
        dumped["ats_option_type"] = {"bool": "BoolOption", "string": "StringOption"}.get(
            dumped["ats_option_type"], dumped["ats_option_type"]
        )
    if isinstance(model, ObservedVm):
        for entry, want in zip(dumped["passthrough"], oracle["passthrough"], strict=False):
            for key in [k for k in entry if k not in want]:
                assert entry.pop(key) is None, (key, entry)  # fields the backing lacks
    return {k: dumped[k] for k in oracle}


def _give_devices(si: Any, vm_name: str) -> None:
    """A fixed, a dynamic and a vGPU passthrough device, and typed extraConfig, on one VM
    (ReconfigVM_Task, as `rackcert provision` writes them)."""
    from pyVmomi import vim

    content = si.content
    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
    vm = next(v for v in view.view if v.name == vm_name)
    view.DestroyView()
    pt = vim.vm.device.VirtualPCIPassthrough
    backings = [
        pt.DeviceBackingInfo(
            id="0000:b1:00.0", deviceId="20b5", systemId="6390e6c2-test", vendorId=0x10DE
        ),
        pt.DynamicBackingInfo(
            allowedDevice=[pt.AllowedDevice(vendorId=0x10DE, deviceId=0x20B5)], deviceName=""
        ),
        pt.VmiopBackingInfo(vgpu="grid_a100d-40c"),
    ]
    changes = [
        vim.vm.device.VirtualDeviceSpec(
            operation="add", device=pt(key=-1 - i, backing=backing, deviceInfo=None)
        )
        for i, backing in enumerate(backings)
    ]
    extra = [
        vim.option.OptionValue(key="pciPassthru.use64bitMMIO", value="TRUE"),
        vim.option.OptionValue(key="rackcert.test.number", value="42"),
        vim.option.OptionValue(key="rackcert.test.empty", value=""),
    ]
    spec = vim.vm.ConfigSpec(deviceChange=changes, extraConfig=extra)
    from pyVim.task import WaitForTask

    assert WaitForTask(vm.ReconfigVM_Task(spec)) == "success"


def test_xml_reading_matches_pyvmomis_objects(rack_twin):
    existing = {"name": "gpu-vm", "host": "esx02.example.internal", "cpus": 4, "memory_mb": 4096}
    lab = rack_twin(R750, vms=[existing])
    from pyVmomi import vim

    with lab.connect() as si:
        _give_devices(si, "gpu-vm")
        extra = {vim.HostSystem: WIDE_HOST, vim.VirtualMachine: ["config.memoryAllocation"]}
        objects, collected = retrieve_all(si, {}, extra)
        inventory = discover(si)
    hosts = {o.obj._moId: o for o in objects if isinstance(o.obj, vim.HostSystem)}
    vms = {o.obj._moId: o for o in objects if isinstance(o.obj, vim.VirtualMachine)}
    assert len(hosts) == len(collected.hosts) == 4 and len(vms) == len(collected.vms) >= 5
    for moid, (host, _stores, _nets) in collected.hosts.items():
        oracle = _oracle_host({p.name: p.val for p in hosts[moid].propSet})
        assert _ours(host, oracle) == oracle
    kinds = set()
    for moid, (vm, _host) in collected.vms.items():
        oracle = _oracle_vm({p.name: p.val for p in vms[moid].propSet})
        assert _ours(vm, oracle) == oracle
        kinds |= {d["backing"] for d in oracle["passthrough"]}
        kinds |= {"disk"} if oracle["disks"] else set()
        kinds |= {"nic"} if oracle["nics"] else set()
    assert kinds == {"fixed", "dynamic", "vgpu", "disk", "nic"}  # each kind was compared
    gpu_vm = inventory.vm("gpu-vm")
    assert [d.backing for d in gpu_vm.passthrough] == ["fixed", "dynamic", "vgpu"]
    assert gpu_vm.extra_config["rackcert.test.number"] == "42"
    assert gpu_vm.extra_config["rackcert.test.empty"] == ""
    template = inventory.templates[0]  # the clone source: a disk and a vmxnet3 NIC
    assert template.disks[0].datastore and template.nics[0].type == "vmxnet3"


def test_a_fault_is_pyvmomis_fault_and_the_session_carries_on(rack_twin):
    from pyVmomi import vmodl

    lab = rack_twin(R750)
    with lab.connect() as si:
        pc = si.content.propertyCollector
        with pytest.raises(vmodl.fault.InvalidArgument) as streamed:
            soapstream.call_streamed(pc, "ContinueRetrievePropertiesEx", ["page-0"], _never)
        with pytest.raises(vmodl.fault.InvalidArgument) as theirs:
            pc.ContinueRetrievePropertiesEx("page-0")
        assert streamed.value.msg == theirs.value.msg and "page-0" in streamed.value.msg
        assert len(discover(si).hosts) == 4  # the connection went back to the pool, usable
        si.content.sessionManager.Logout()
        with pytest.raises(DiscoveryError, match=r"^vCenter discovery failed: \S") as failed:
            discover(si)
    assert "\n" not in str(failed.value)


def _never(element: Any, page: Any) -> None:
    raise AssertionError("no object expected")


def test_objects_arrive_while_the_page_streams_and_are_dropped(rack_twin, monkeypatch):
    """Each ObjectContent reaches discovery once its XML has arrived, before the rest of the
    page, and is cleared after: one object's elements are held, never a page of them."""
    from pyVmomi import vim, vmodl

    lab = rack_twin(R750, hosts=12)
    monkeypatch.setattr(soapstream, "CHUNK", 2048)
    read: list[int] = []
    plain = soapstream._reader

    def counting(resp: Any) -> Any:
        body = plain(resp)

        class Counted:
            def read(self, n: int = -1) -> bytes:
                chunk: bytes = body.read(n)
                read.append(len(chunk))
                return chunk

        return Counted()

    monkeypatch.setattr(soapstream, "_reader", counting)
    seen: list[tuple[int, Any]] = []
    with lab.connect() as si:
        content = si.content
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.HostSystem], True)
        pc = vmodl.query.PropertyCollector
        spec = pc.FilterSpec(
            objectSet=[
                pc.ObjectSpec(
                    obj=view,
                    skip=True,
                    selectSet=[pc.TraversalSpec(path="view", type=vim.view.ContainerView)],
                )
            ],
            propSet=[pc.PropertySpec(type=vim.HostSystem, pathSet=["name", "hardware.pciDevice"])],
        )
        page = soapstream.call_streamed(
            content.propertyCollector,
            "RetrievePropertiesEx",
            [[spec], pc.RetrieveOptions()],
            lambda element, _page: seen.append((sum(read), element)),
        )
        view.DestroyView()
    total = sum(read)
    assert page.objects == len(seen) == 12 and page.token is None
    assert seen[0][0] < total / 4  # the first host came with the first quarter of the body
    assert [at for at, _ in seen] == sorted(at for at, _ in seen)
    assert all(len(element) == 0 and not element.attrib for _, element in seen)  # cleared


def test_the_next_page_is_asked_for_before_this_pages_objects_are_read(rack_twin, monkeypatch):
    """vCenter builds page n+1 while page n is read: the continuation goes out as soon as
    page n's token arrives, before any of its objects is converted."""
    from provision import discovery

    lab = rack_twin(R750, desc={"page_size": 3})
    log: list[str] = []
    send, take = discovery.send, discovery._Collected.take

    def sending(mo: Any, method: str, args: list[Any]) -> Any:
        log.append("ask")
        return send(mo, method, args)

    def taking(self: Any, element: Any, page: Any) -> None:
        log.append("object")
        take(self, element, page)

    monkeypatch.setattr(discovery, "send", sending)
    monkeypatch.setattr(discovery._Collected, "take", taking)
    with lab.connect() as si:
        inv = discover(si)
    full, rest = divmod(log.count("object"), 3)
    assert inv.pages == full + (rest > 0) > 2
    assert log == (["ask"] + ["object"] * 3) * (inv.pages - 1) + ["object"] * (rest or 3)
    assert inv.round_trips == 4 + inv.pages  # asking ahead asks for each page once
