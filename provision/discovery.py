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

The answer is read as XML, not through pyVmomi's deserializer: each page is parsed
as it streams in and each object converted to rackcert's models as it closes, then
dropped (provision.soapstream, provision.objectcontent), so a vCenter at its
configuration maximum costs seconds, not minutes, and the controller holds the
models and one object's XML.
"""

from __future__ import annotations

import contextlib
import gc
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from typing import Any

from provision.objectcontent import Reader, option_type_named, truthy, u16
from provision.soapstream import Page, Sent, call_streamed, receive, send
from provision.viewspec import view_filter_spec
from rackcert.core.errors import RackcertError
from rackcert.core.observed import EsxcliHost, Inventory, ObservedHost, ObservedVm
from rackcert.core.vsphere_rules import ATS_OPTION, TRANSIENT_FAULTS, with_retries

ATS_VALUE = f'config.option["{ATS_OPTION}"]'
ATS_DEF = f'config.optionDef["{ATS_OPTION}"]'

# Only what discovery reads: whole data objects where it reads most of them (PCI devices,
# passthrough state and NUMA nodes, each needed for every device), single fields where
# the object carries much it never reads (summary.hardware and hardware.systemInfo list
# otherIdentifyingInfo; graphicsConfig lists every device; a VM's memoryAllocation its
# shares and limits). Property paths may name a field of a data object (vSphere Web
# Services SDK Programming Guide, "Property paths"); `rackcert capture`, which records the
# whole objects, asks for those as well (provision.capture._extra).
HOST_PROPERTIES = [
    "name",
    "summary.hardware.vendor",
    "summary.hardware.model",
    "summary.hardware.memorySize",
    "summary.rebootRequired",
    "config.product",
    ATS_VALUE,
    ATS_DEF,
    "config.pciPassthruInfo",
    "config.sharedPassthruGpuTypes",
    "config.graphicsConfig.hostDefaultGraphicsType",
    "hardware.pciDevice",
    "hardware.numaInfo",
    "hardware.systemInfo.vendor",
    "hardware.systemInfo.model",
    "hardware.systemInfo.uuid",
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
    "config.hardware.device",  # disks, NICs and passthrough: no path selects by device type
    "config.memoryReservationLockedToMax",
    "config.memoryAllocation.reservation",
    "config.extraConfig",
    "config.managedBy",
    "config.template",
    "guest.ipAddress",
]
NAMED = ["name"]  # datastores and networks: their names, for the hosts' lists
# VirtualMachineConfigInfo.deviceGroups (API 8.0.0.1): asked only of a vCenter that speaks
# that release, since an older one answers the unknown path with InvalidProperty.
DEVICE_GROUPS = "config.deviceGroups"


def speaks_device_groups(si: Any) -> bool:
    """The session's negotiated API version is 8.0.0.1 or later (vendor device groups)."""
    version = str(getattr(si._stub, "versionId", "") or "").strip('"').rsplit("/", 1)[-1]
    try:
        parts = tuple(int(x) for x in version.split("."))
    except ValueError:
        return False
    return parts >= (8, 0, 0, 1)


class DiscoveryError(RackcertError):
    """vCenter answered discovery with a fault or the connection kept dropping."""


_u16 = u16  # capture reads pyVmomi's objects with the same rules
_truthy = truthy


def _option_type(definition: Any, value: Any) -> str:
    """bool/string/int/long from a pyVmomi OptionDef (capture); "" when the host has none."""
    return option_type_named(type(getattr(definition, "optionType", None)).__name__, value)


def _filter_spec(vim: Any, view: Any, extra: dict[Any, list[str]] | None = None) -> Any:
    paths = {
        vim.HostSystem: HOST_PROPERTIES,
        vim.VirtualMachine: VM_PROPERTIES,
        vim.Datastore: NAMED,
        vim.Network: NAMED,
    }
    for kind, more in (extra or {}).items():
        paths[kind] = list(dict.fromkeys([*paths.get(kind, []), *more]))
    return view_filter_spec(view, paths, reportMissingObjectsInResults=False)


# Objects per page we ask for (RetrieveOptions.maxObjects); vCenter may return fewer
# by its own policy and hands out a token for the rest.
PAGE_OBJECTS = 1000

Take = Callable[[ET.Element, Page], None]
CONTINUE = "ContinueRetrievePropertiesEx"


def _pages(
    pc: Any,
    spec: Any,
    options: Any,
    stats: dict[str, int],
    take: Take,
    keep: list[bytes] | None = None,
) -> None:
    """One retrieval followed through its continuation tokens, each ObjectContent handed to
    `take` as it arrives and then dropped (provision.soapstream).

    The next page is asked for as soon as a page's token arrives, ahead of its objects, on
    a second pooled connection: vCenter builds page n+1 while this process reads page n,
    and its answer waits in the socket (measured at 1,000 hosts on two busy CPUs: time
    spent waiting for vCenter 3.0-4.4 s one page after the other, 0.7-1.0 s asked ahead).
    """
    ahead: list[Sent] = []

    def ask_ahead(token: str) -> None:
        ahead.append(send(pc, CONTINUE, [token]))

    try:
        page = call_streamed(pc, "RetrievePropertiesEx", [[spec], options], take, keep, ask_ahead)
        stats["pages"] = 1
        while page.token:
            # asked ahead, unless the token came after the objects (not the WSDL's order)
            sent = ahead.pop() if ahead else send(pc, CONTINUE, [page.token])
            page = receive(sent, take, keep, ask_ahead)
            stats["pages"] += 1
    finally:
        for sent in ahead:  # a page failed after asking for the next: that answer is unread
            sent.conn.close()


@contextlib.contextmanager
def _cycles_not_collected() -> Iterator[None]:
    """Python's cyclic garbage collector paused while the pages are read, then restored as
    it was. Reading allocates an element per XML node (millions at 2,500 hosts) and a model
    per device; none forms a reference cycle, so reference counting frees them all, but
    every allocation burst set off collections that walk all the models built so far: half
    of discovery's CPU at 1,000 hosts (measured)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _stream_paged(
    si: Any,
    stats: dict[str, int],
    fresh: Callable[[], Take],
    extra: dict[Any, list[str]] | None = None,
    keep: Callable[[], list[bytes]] | None = None,
) -> None:
    """Every host, VM, datastore and network (and `extra`'s types), object by object, through
    one view. A dropped connection restarts the retrieval with a fresh consumer (a token
    cannot be replayed: the page it was answering may already be consumed)."""
    from pyVmomi import vim, vmodl

    content = si.content
    if speaks_device_groups(si):
        extra = {**(extra or {})}
        extra[vim.VirtualMachine] = [*extra.get(vim.VirtualMachine, []), DEVICE_GROUPS]
    kinds = [vim.HostSystem, vim.VirtualMachine, vim.Datastore, vim.Network]
    kinds += [k for k in (extra or {}) if k not in kinds]
    view = content.viewManager.CreateContainerView(content.rootFolder, kinds, True)
    try:
        pc = content.propertyCollector
        options = vmodl.query.PropertyCollector.RetrieveOptions(maxObjects=PAGE_OBJECTS)
        spec = _filter_spec(vim, view, extra)
        with _cycles_not_collected():
            with_retries(
                lambda: _pages(pc, spec, options, stats, fresh(), keep() if keep else None), 3
            )
    finally:
        with contextlib.suppress(*TRANSIENT_FAULTS):
            view.DestroyView()


def retrieve_all(
    si: Any, stats: dict[str, int] | None = None, extra: dict[Any, list[str]] | None = None
) -> tuple[list[Any], _Collected]:
    """Every host and VM object content as pyVmomi's objects, and discovery's reading of the
    same answer: one retrieval, followed through its pages.

    `extra` adds properties (and object types) to the same retrieval: `rackcert capture`
    reads clusters, datacenters and more per host in the one call discovery makes, and
    keeps the SOAP objects (pyVmomi deserializes each page's body once it is read; discovery
    alone never builds them).
    """
    from pyVmomi import SoapAdapter, vmodl

    bodies: list[bytes] = []
    collected = _Collected(Reader(si._stub.version))

    def fresh() -> Take:
        nonlocal collected
        bodies.clear()
        collected = _Collected(Reader(si._stub.version))
        return collected.take

    _stream_paged(si, {} if stats is None else stats, fresh, extra, lambda: bodies)
    objects: list[Any] = []
    kind = vmodl.query.PropertyCollector.RetrieveResult
    for body in bodies:
        result = SoapAdapter.SoapResponseDeserializer(si._stub).Deserialize(body, kind)
        objects.extend(result.objects if result else [])
    return objects, collected


class _Collected:
    """What the pages said, converted as each object arrives (rackcert's models, not SOAP
    objects): hosts, VMs with their host's moid, and datastore/network names."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.hosts: dict[str, tuple[ObservedHost, list[str], list[str]]] = {}
        self.vms: dict[str, tuple[ObservedVm, str | None]] = {}
        self.names: dict[str, str] = {}
        self._kinds: dict[str, str] = {}

    def _kind(self, name: str) -> str:
        """host, vm, named or "" for a managed-object type name (subtypes included: a
        DistributedVirtualPortgroup is a Network), by pyVmomi's type tables."""
        kind = self._kinds.get(name)
        if kind is None:
            from pyVmomi import vim

            is_a = self.reader.is_a
            kind = self._kinds[name] = (
                "host"
                if is_a(name, vim.HostSystem)
                else "vm"
                if is_a(name, vim.VirtualMachine)
                else "named"
                if is_a(name, vim.Datastore) or is_a(name, vim.Network)
                else ""
            )
        return kind

    def take(self, element: ET.Element, page: Page) -> None:
        reader = self.reader
        content = reader.content(element)
        kind, moid, props = self._kind(content.kind), content.moid, content.props
        if kind == "host":
            refs = [r.text or "" for r in props.get("datastore", ())]
            nets = [r.text or "" for r in props.get("network", ())]
            host = reader.host(content, page, ATS_VALUE, ATS_DEF)
            _ats_inferred(host)
            self.hosts[moid] = (host, refs, nets)
        elif kind == "vm":
            host_ref = props.get("runtime.host")
            host = (host_ref.text or "") if host_ref is not None else None
            self.vms[moid] = (reader.vm(content, page), host)
        elif kind == "named":
            name = props.get("name")
            self.names[moid] = (name.text or "") if name is not None else ""


def discover(si: Any, *, esxcli: bool = False) -> Inventory:
    """The rack as vCenter sees it now; `round_trips` counts the SOAP calls it took.

    esxcli: also ask each host, through esxcli, what operators trust it for (`_esxcli_facts`):
    five calls per host, a few hosts at a time; plan and provision's final look ask, the
    discovery benchmark does not.
    """
    from pyVmomi import vmodl

    from provision.roundtrips import count_round_trips

    started = time.perf_counter()
    stats: dict[str, int] = {}
    collected = _Collected(Reader(si._stub.version))

    def fresh() -> Take:
        nonlocal collected
        collected = _Collected(Reader(si._stub.version))
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
    if esxcli:
        esxcli_calls += _esxcli_facts(si, inventory)
    inventory.round_trips = counter.calls + esxcli_calls
    inventory.pages = stats.get("pages", 0)
    inventory.seconds = round(time.perf_counter() - started, 4)
    return inventory


# Hosts asked through esxcli at once: each call is a round trip through vCenter to the host.
ESXCLI_CONCURRENCY = 8


def _esxcli_facts(si: Any, inventory: Inventory) -> int:
    """Fill each host's `esxcli` record (provision.esxcli.host_facts); the calls it took.

    A host vCenter does not show connected is not asked: its record says so (unknown).
    """
    from concurrent.futures import ThreadPoolExecutor

    from provision.esxcli import host_facts

    asked = [h for h in inventory.hosts if h.connection_state == "connected"]
    for host in inventory.hosts:
        if host not in asked:
            host.esxcli = EsxcliHost(
                answered=False, error=f"host {host.connection_state or 'unreachable'}"
            )
    with ThreadPoolExecutor(max_workers=ESXCLI_CONCURRENCY) as pool:
        answers = list(pool.map(lambda h: host_facts(si, h.moid), asked))
    for host, (facts, _) in zip(asked, answers, strict=True):
        host.esxcli = facts
    return sum(calls for _, calls in answers)


def inventory_from(collected: _Collected, about: Any) -> Inventory:
    """The Inventory of one retrieval (capture's, which keeps pyVmomi's objects as well)."""
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
