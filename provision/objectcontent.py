"""One ObjectContent of a PropertyCollector answer, as XML, into rackcert's models.

The fields discovery reads, read from the element ElementTree built (provision.soapstream)
with the typing pyVmomi's deserializer applies (SoapAdapter.SoapDeserializer): a
missing element is None and a present empty one "", xsd:boolean is "true"/"1" or
"false"/"0", integers are parsed whole, xsd:dateTime by pyVmomi's own Iso8601 parser,
and an xsi:type names the class through pyVmomi's type tables, mapped to the session's
API version (GetCompatibleType), so `isinstance` questions (a passthrough device, a NIC,
a Network) get pyVmomi's answers. The models come out exactly as they did from pyVmomi's
objects; tests/integration/test_vsphere_discovery_xml.py holds the two side by side on a twin.

Field names and types are the vSphere Web Services API reference's (HostPciDevice,
HostNumaInfo, HostPciPassthruInfo, VirtualDevice and its backings, OptionValue).
"""

from __future__ import annotations

import functools
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any

from provision.soapstream import XSI_TYPE, Page
from rackcert.core.observed import (
    ObservedHost,
    ObservedVm,
    PassthroughDevice,
    PciDevice,
    VirtualDisk,
    VirtualNic,
)


def u16(value: int | None) -> int:
    """vSphere types PCI ids as xsd:short: 0x8086 arrives as -31610."""
    return (value or 0) & 0xFFFF


def truthy(value: Any) -> bool:
    """An advanced option's value as a switch: "true"/"1"/"yes"/"on" strings, else bool()."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)


def option_type_named(kind: str, value: Any) -> str:
    """bool/string/int/long from the class name of the host's OptionDef.optionType; "" when
    the host has no such option (no definition and no value)."""
    kind = kind.lower()
    for name in ("bool", "string", "long", "int"):
        if name in kind:
            return name
    if value is None:
        return ""
    return "bool" if isinstance(value, bool) else "string" if isinstance(value, str) else "long"


def parse_bool(text: str) -> bool:
    """xsd:boolean as pyVmomi reads it (SoapDeserializer.EndElementHandler)."""
    if text == "0" or text.lower() == "false":
        return False
    if text == "1" or text.lower() == "true":
        return True
    raise TypeError(text)


def _int(el: ET.Element | None, tag: str) -> int | None:
    text = None if el is None else el.findtext(tag)
    return None if text is None else int(text)


def _text(el: ET.Element | None, tag: str) -> str | None:
    return None if el is None else el.findtext(tag)


def _value(el: ET.Element | None) -> str | None:
    """A primitive property value: None when absent, "" when empty."""
    return None if el is None else (el.text or "")


def _int_text(text: str | None) -> int | None:
    return None if text is None else int(text)


def _flag(fields: dict[str, str | None] | None, tag: str) -> bool:
    """A HostPciPassthruInfo flag; False where the device has no passthrough entry."""
    text = None if fields is None else fields.get(tag)
    return text is not None and parse_bool(text)


@dataclass(frozen=True)
class Content:
    """One ObjectContent: its managed-object type name and id, and each property's `val`."""

    kind: str
    moid: str
    props: dict[str, ET.Element]


class Reader:
    """Reads the ObjectContent elements of one session's answers."""

    def __init__(self, version: str) -> None:
        from pyVmomi import VmomiSupport, vim

        self.version = version
        self.ns = VmomiSupport.GetWsdlNamespace(version)
        self.vim = vim
        self._tags: dict[str, str] = {}
        t = self.tag
        self.OBJ, self.PROPSET, self.NAME, self.VAL = t("obj"), t("propSet"), t("name"), t("val")

    def tag(self, name: str) -> str:
        """`name` in the vim25 namespace, as ElementTree spells it ({urn:vim25}name)."""
        tag = self._tags.get(name)
        if tag is None:
            tag = self._tags[name] = f"{{{self.ns}}}{name}"
        return tag

    def content(self, element: ET.Element) -> Content:
        obj = element.find(self.OBJ)
        kind, moid = ("", "") if obj is None else (obj.get("type") or "", obj.text or "")
        props: dict[str, ET.Element] = {}
        name_tag, val_tag = self.NAME, self.VAL
        for prop in element.iterfind(self.PROPSET):
            val = prop.find(val_tag)
            if val is not None:
                props[prop.findtext(name_tag) or ""] = val
        return Content(kind, moid, props)

    def is_a(self, name: str, cls: type) -> bool:
        """Whether the managed-object type `name` (a moref's type attribute) is `cls` or
        below; pyVmomi reads the attribute without a namespace prefix."""
        found = _lookup(self.ns, name.rpartition(":")[2], self.version)
        return found is not None and issubclass(found, cls)

    def cls(self, qname: str, page: Page) -> type | None:
        """The class an xsi:type QName names. Its prefix is not resolved (the page's
        namespace declarations are not tracked): vim25's type names are capitalised and XML
        Schema's are not (string, boolean, long), so the local name alone decides, looked up
        in vim25 first and then, as pyVmomi's own fallback does, in every namespace it knows
        (GuessWsdlType)."""
        found = page.classes.get(qname, page)
        if found is page:
            found = page.classes[qname] = _lookup(self.ns, qname.rpartition(":")[2], self.version)
        return found  # type: ignore[return-value]

    def xsi_cls(self, el: ET.Element, page: Page, static: type) -> type:
        """The class of a data object element: its xsi:type, else the field's static type."""
        qname = el.get(XSI_TYPE)
        return (self.cls(qname, page) if qname else None) or static

    def any_value(self, el: ET.Element | None, page: Page) -> Any:
        """An xsd:anyType value (OptionValue.value) typed by its xsi:type, as pyVmomi does."""
        if el is None:
            return None
        text = el.text or ""
        qname = el.get(XSI_TYPE)
        cls = self.cls(qname, page) if qname else None
        if cls is bool:
            return parse_bool(text)
        if cls is not None and issubclass(cls, int):
            return int(text)
        if cls is not None and issubclass(cls, float):
            return float(text)
        if cls is not None and cls.__name__ == "datetime":
            return _datetime(text)
        return text

    def host(self, c: Content, page: Page, ats_value: str, ats_def: str) -> ObservedHost:
        """HostSystem properties (provision.discovery.HOST_PROPERTIES) into an ObservedHost."""
        t, p = self.tag, c.props
        numa = p.get("hardware.numaInfo")
        numa_of: dict[str, int | None] = {}
        for node in numa.iterfind(t("numaNode")) if numa is not None else ():
            type_id = _int(node, t("typeId"))
            for pci in node.iterfind(t("pciId")):
                numa_of[pci.text or ""] = type_id
        passthru: dict[str | None, dict[str, str | None]] = {}
        for info in p.get("config.pciPassthruInfo", ()):
            fields = {child.tag: child.text for child in info}
            passthru[fields.get(t("id"))] = fields
        devices = [self._pci(dev, passthru, numa_of) for dev in p.get("hardware.pciDevice", ())]
        option = p.get(ats_value)
        ats = self.any_value(option.find(t("value")), page) if option is not None else None
        kind = _option_kind(self, p.get(ats_def), page)
        product = p.get("config.product")
        # hardware.systemInfo where the host has it, else the summary (HostHardwareSummary)
        system = (
            "hardware.systemInfo."
            if "hardware.systemInfo.uuid" in p or ("hardware.systemInfo.vendor" in p)
            else "summary.hardware."
        )
        name = _value(p.get("name"))
        return ObservedHost(
            name=name if name is not None else c.moid,
            moid=c.moid,
            address=name if name is not None else "",
            vendor=_value(p.get(system + "vendor")) or "",
            model=_value(p.get(system + "model")) or "",
            esxi_version=_text(product, t("version")) or "",
            esxi_build=_text(product, t("build")) or "",
            api_version=_text(product, t("apiVersion")) or "",
            system_id=_value(p.get("hardware.systemInfo.uuid")) or "",
            connection_state=_value(p.get("runtime.connectionState")) or "",
            power_state=_value(p.get("runtime.powerState")) or "",
            in_maintenance=_prop_bool(p, "runtime.inMaintenanceMode"),
            reboot_required=_prop_bool(p, "summary.rebootRequired"),
            ats_enabled=truthy(ats) if ats is not None else None,
            ats_option_type=option_type_named(kind, ats),
            rebind_without_reboot=_prop_bool(p, "capability.deviceRebindWithoutRebootSupported"),
            boot_time=_datetime(_value(p.get("runtime.bootTime"))),
            graphics_type=_value(p.get("config.graphicsConfig.hostDefaultGraphicsType")) or "",
            numa_nodes=_int(numa, t("numNodes")) or 0,
            memory_mb=_prop_int(p, "summary.hardware.memorySize") // (1024 * 1024),
            pci_devices=devices,
            vgpu_types=[s.text or "" for s in p.get("config.sharedPassthruGpuTypes", ())],
            bios_version=_text(p.get("hardware.biosInfo"), t("biosVersion")) or "",
        )

    def _pci(
        self,
        dev: ET.Element,
        passthru: dict[str | None, dict[str, str | None]],
        numa_of: dict[str, int | None],
    ) -> PciDevice:
        """One HostPciDevice, its passthrough state and NUMA node. Its fields are read in
        one pass (a host at the limit has hundreds of PCI functions)."""
        t = self.tag
        f = {child.tag: child.text for child in dev}
        pci_id = f.get(t("id"))
        info = passthru.get(pci_id)
        return PciDevice(
            id=pci_id,
            vendor_id=u16(_int_text(f.get(t("vendorId")))),
            device_id=u16(_int_text(f.get(t("deviceId")))),
            sub_vendor_id=u16(_int_text(f.get(t("subVendorId")))),
            sub_device_id=u16(_int_text(f.get(t("subDeviceId")))),
            class_id=u16(_int_text(f.get(t("classId")))),
            vendor_name=f.get(t("vendorName")) or "",
            device_name=f.get(t("deviceName")) or "",
            parent_bridge=f.get(t("parentBridge")) or None,
            numa_node=numa_of.get(pci_id) if pci_id is not None else None,
            passthru_capable=_flag(info, t("passthruCapable")),
            passthru_enabled=_flag(info, t("passthruEnabled")),
            passthru_active=_flag(info, t("passthruActive")),
        )

    def vm(self, c: Content, page: Page) -> ObservedVm:
        """VirtualMachine properties (provision.discovery.VM_PROPERTIES) into an ObservedVm."""
        t, p, device = self.tag, c.props, self.vim.vm.device
        devices, disks, nics = [], [], []
        for dev in p.get("config.hardware.device", ()):
            cls = self.xsi_cls(dev, page, device.VirtualDevice)
            if issubclass(cls, device.VirtualPCIPassthrough):
                devices.append(self._passthrough(dev, page))
            elif issubclass(cls, device.VirtualDisk):
                disks.append(self._disk(dev))
            elif issubclass(cls, device.VirtualEthernetCard):
                nics.append(self._nic(dev, cls))
        extra: dict[str, str] = {}
        for option in p.get("config.extraConfig", ()):
            value = self.any_value(option.find(t("value")), page)
            extra[option.findtext(t("key")) or ""] = str(value)
        name = _value(p.get("name"))
        return ObservedVm(
            name=name if name is not None else c.moid,
            moid=c.moid,
            power_state=_value(p.get("runtime.powerState")) or "",
            firmware=_value(p.get("config.firmware")) or "",
            guest_id=_value(p.get("config.guestId")) or "",
            num_cpus=_prop_int(p, "config.hardware.numCPU"),
            memory_mb=_prop_int(p, "config.hardware.memoryMB"),
            memory_reservation_locked=_prop_bool(p, "config.memoryReservationLockedToMax"),
            memory_reservation_mb=_prop_int(p, "config.memoryAllocation.reservation"),
            hardware_version=_value(p.get("config.version")) or "",
            extra_config=extra,
            passthrough=devices,
            managed_by=_text(p.get("config.managedBy"), t("extensionKey")) or "",
            template=_prop_bool(p, "config.template"),
            disks=disks,
            nics=nics,
            guest_ip=_value(p.get("guest.ipAddress")) or "",
            device_groups=self._device_groups(p.get("config.deviceGroups")),
        )

    def _device_groups(self, prop: Any) -> dict[int, str]:
        """config.deviceGroups: each VendorDeviceGroup's groupInstanceKey and name."""
        t = self.tag
        if prop is None:
            return {}
        out: dict[int, str] = {}
        for group in prop.findall(t("deviceGroup")):
            key = _int(group, t("groupInstanceKey"))
            if key is not None:
                out[key] = group.findtext(t("deviceGroupName")) or ""
        return out

    def _disk(self, dev: ET.Element) -> VirtualDisk:
        t = self.tag
        name = _text(dev.find(t("backing")), t("fileName")) or ""
        datastore = name[1 : name.index("]")] if name.startswith("[") and "]" in name else ""
        capacity = _int(dev, t("capacityInKB")) or 0
        return VirtualDisk(
            key=_int(dev, t("key")), capacity_gb=round(capacity / 1024**2, 3), datastore=datastore
        )

    def _nic(self, dev: ET.Element, cls: type) -> VirtualNic:
        t = self.tag
        kind = cls.__name__.rsplit(".", 1)[-1].removeprefix("Virtual").lower()
        network = _text(dev.find(t("backing")), t("deviceName")) or ""
        return VirtualNic(key=_int(dev, t("key")), type=kind, network=network)

    def _passthrough(self, dev: ET.Element, page: Page) -> PassthroughDevice:
        t, passthrough = self.tag, self.vim.vm.device.VirtualPCIPassthrough
        key = _int(dev, t("key"))
        info = dev.find(t("deviceInfo"))
        label = info.findtext(t("label")) if info is not None else ""
        backing = dev.find(t("backing"))
        static = self.vim.vm.device.VirtualDevice.BackingInfo
        cls = self.xsi_cls(backing, page, static) if backing is not None else None
        group = dev.find(t("deviceGroupInfo"))  # vSphere 8: the device is a group member
        grouped: dict[str, Any] = {}
        if group is not None:
            grouped = {
                "group_key": _int(group, t("groupInstanceKey")),
                "group_sequence": _int(group, t("sequenceId")),
            }
        if cls is not None and issubclass(cls, passthrough.VmiopBackingInfo):
            return PassthroughDevice(
                key=key, backing="vgpu", vgpu=_text(backing, t("vgpu")), label=label, **grouped
            )
        if cls is not None and issubclass(cls, passthrough.DynamicBackingInfo):
            allowed = backing.find(t("allowedDevice")) if backing is not None else None
            return PassthroughDevice(
                key=key,
                backing="dynamic",
                vendor_id=u16(_int(allowed, t("vendorId"))) if allowed is not None else None,
                device_id=u16(_int(allowed, t("deviceId"))) if allowed is not None else None,
                label=label,
            )
        device_id = _text(backing, t("deviceId"))
        return PassthroughDevice(
            key=key,
            backing="fixed",
            id=_text(backing, t("id")),
            vendor_id=u16(_int(backing, t("vendorId"))),
            device_id=int(device_id, 16) if device_id else None,
            system_id=_text(backing, t("systemId")),
            label=label,
            **grouped,
        )


@functools.lru_cache(maxsize=1024)
def _lookup(ns: str, name: str, version: str) -> type | None:
    """pyVmomi's class for a WSDL type, as its deserializer finds it (LookupWsdlType, then
    GetCompatibleType for the session's version); None for a type pyVmomi does not know."""
    from pyVmomi import VmomiSupport

    try:
        cls = VmomiSupport.GetWsdlType(ns, name)
    except KeyError:
        try:
            cls = VmomiSupport.GuessWsdlType(name)
        except KeyError:
            return None
    return VmomiSupport.GetCompatibleType(cls, version)


def _option_kind(reader: Reader, definition: ET.Element | None, page: Page) -> str:
    """The class name of OptionDef.optionType (vim.option.BoolOption, ...), as
    `type(definition.optionType).__name__` reads on pyVmomi's objects."""
    if definition is None:
        return "NoneType"
    option_type = definition.find(reader.tag("optionType"))
    if option_type is None:
        return "NoneType"
    return reader.xsi_cls(option_type, page, reader.vim.option.OptionType).__name__


def _prop_bool(props: dict[str, ET.Element], name: str) -> bool:
    text = _value(props.get(name))
    return bool(text is not None and parse_bool(text))


def _prop_int(props: dict[str, ET.Element], name: str) -> int:
    text = _value(props.get(name))
    return int(text) if text is not None else 0


def _datetime(text: str | None) -> Any:
    if text is None:
        return None
    from pyVmomi import Iso8601

    parsed = Iso8601.ParseISO8601(text)
    if not parsed:
        raise TypeError(text)
    return parsed
