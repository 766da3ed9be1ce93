"""One ESXi host's hardware as a spec sees it: GPUs, NICs and NVLink pairs from an ObservedHost.

Why a separate step: vSphere lists every PCI function of a host (bridges, storage, USB,
each port of a NIC); a spec lists only the parts rackcert gives to VMs, named by model,
with memory and line rate. This module makes that translation with the catalog, per host,
so that hosts can then be grouped into hardware profiles by equality.

Rules:
- a GPU is a device whose ids are in the GPU catalog, or any NVIDIA display/3D controller
  (class 03xx) with a note asking for its memory;
- a NIC is a device whose ids are in the NIC catalog; the functions of one card
  (same domain:bus:device) are its ports, listed once at function 0;
- NVLink pairs come from the server catalog when the host's vendor and model match.

Example:
    hw = host_hardware(observed_host, load_catalog())
    [g.pci for g in hw.gpus]       # ['0000:17:00.0', '0000:31:00.0', ...]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rackcert.core.observed import ObservedHost, PciDevice
from rackcert.core.pci import is_mellanox_nic, is_nvidia_gpu
from rackcert.core.spec import normalize_pci
from rackcert.discover.catalog import Catalog, ServerModel

MAX_NOTES = 5


@dataclass
class GpuSeen:
    pci: str
    model: str
    memory_gb: int
    numa: int
    nvlink_peer: str | None = None
    short: str = "gpu"

    def key(self) -> tuple:
        return (self.pci, self.model, self.memory_gb, self.numa, self.nvlink_peer)


@dataclass
class NicSeen:
    pci: str
    model: str
    ports: int
    speed_gbps: int
    numa: int

    def key(self) -> tuple:
        return (self.pci, self.model, self.ports, self.speed_gbps, self.numa)


@dataclass
class HostHardware:
    """What the draft says about one host; `pair_source` tells where nvlink_peer came from."""

    name: str
    address: str
    esxi_version: str
    vendor: str
    server_model: str
    numa_nodes: int
    gpus: list[GpuSeen] = field(default_factory=list)
    nics: list[NicSeen] = field(default_factory=list)
    server: ServerModel | None = None
    pair_source: str = "none"  # "catalog", "nodes" or "none"
    notes: list[str] = field(default_factory=list)
    vc_name: str = ""  # the name vCenter knows the host by (ObservedVm.host refers to it)

    def profile_key(self) -> tuple:
        """Hosts with equal keys share one hardware profile."""
        return (
            self.vendor,
            self.server_model,
            self.numa_nodes,
            tuple(g.key() for g in self.gpus),
            tuple(n.key() for n in self.nics),
        )

    def gpu(self, pci: str) -> GpuSeen | None:
        return next((g for g in self.gpus if g.pci == pci), None)


def _pci(device: PciDevice) -> str | None:
    try:
        return normalize_pci(device.id)
    except ValueError:
        return None


def _function0(pci: str) -> str:
    return pci[:-1] + "0"


def _memory_guess(name: str) -> int | None:
    found = re.search(r"(\d+)\s*GB", name, re.I)
    return int(found.group(1)) if found else None


def _gpus(host: ObservedHost, catalog: Catalog, notes: list[str]) -> list[GpuSeen]:
    gpus = []
    for dev in host.pci_devices:
        pci = _pci(dev)
        part = catalog.gpu(dev.vendor_id, dev.device_id)
        is_display = is_nvidia_gpu(dev.vendor_id, dev.class_id)
        if pci is None or not (part or is_display):
            continue
        numa = dev.numa_node if dev.numa_node is not None else 0
        if dev.numa_node is None:
            notes.append(f"{pci}: vSphere reported no NUMA node; numa 0 is a placeholder")
        if part:
            gpus.append(GpuSeen(pci, part.model, part.memory_gb, numa, short=part.short))
            continue
        ids = f"{dev.vendor_id & 0xFFFF:04x}:{dev.device_id & 0xFFFF:04x}"
        memory = _memory_guess(dev.device_name) or 1
        notes.append(
            f"{pci}: GPU {ids} ({dev.device_name or 'no name'}) is not in the catalog;"
            f" check model and memory_gb ({memory} is read from its name or a placeholder)"
        )
        model = f"NVIDIA {dev.device_name}".strip() if dev.device_name else f"NVIDIA {ids}"
        gpus.append(GpuSeen(pci, model, memory, numa))
    return sorted(gpus, key=lambda g: g.pci)


def _nics(host: ObservedHost, catalog: Catalog, notes: list[str]) -> list[NicSeen]:
    cards: dict[str, NicSeen] = {}
    for dev in sorted(host.pci_devices, key=lambda d: d.id):
        pci = _pci(dev)
        part = catalog.nic(dev.vendor_id, dev.device_id)
        if pci is None:
            continue
        if part is None:
            if is_mellanox_nic(dev.vendor_id, dev.class_id, infiniband=False):
                ids = f"{dev.vendor_id & 0xFFFF:04x}:{dev.device_id & 0xFFFF:04x}"
                notes.append(f"{pci}: Mellanox {ids} is not in the NIC catalog; not listed")
            continue
        numa = dev.numa_node if dev.numa_node is not None else 0
        card = _function0(pci)
        if card in cards and cards[card].model == part.model:
            cards[card].ports += 1  # another port (PCI function) of the same card
            continue
        where = pci if card in cards else card
        cards[where] = NicSeen(where, part.model, 1, part.speed_gbps, numa)
    return [cards[k] for k in sorted(cards)]


def apply_catalog_pairs(hw: HostHardware) -> None:
    """Set nvlink_peer on the GPU pairs the server catalog says are bridged."""
    if hw.server is None:
        return
    for bridges in hw.server.nvlink_bridges:
        for a, b in bridges.pairs:
            ga, gb = hw.gpu(a), hw.gpu(b)
            if not (ga and gb) or ga.model != gb.model or ga.model not in bridges.gpu_models:
                continue
            ga.nvlink_peer, gb.nvlink_peer = b, a
            hw.pair_source = "catalog"


def spec_name(text: str) -> str:
    """A spec `Name` (letters, digits, . _ -; 63 at most) from a vCenter name."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", text.strip()).lstrip("._-")[:63].rstrip("-")
    return name or "host"


def host_names(names: list[str]) -> dict[str, str]:
    """vCenter host names -> spec host names: the first label of FQDNs when all stay unique.

    vCenter knows a host by its FQDN (esx01.example.internal), which stays the host's
    `address`; the examples name hosts by the short name (esx01). IP addresses and
    names whose short forms collide keep their full (sanitized) form.
    """

    def short(name: str) -> str:
        if re.fullmatch(r"[0-9.]+|[0-9a-fA-F:]+", name):
            return spec_name(name)
        return spec_name(name.split(".", 1)[0])

    shorts = {n: short(n) for n in names}
    if len(set(shorts.values())) == len(names):
        return shorts
    out: dict[str, str] = {}
    taken: set[str] = set()
    for n in sorted(names):
        candidate = spec_name(n)
        number = 2
        while candidate in taken:
            candidate, number = f"{spec_name(n)[:60]}-{number}", number + 1
        taken.add(candidate)
        out[n] = candidate
    return out


def host_hardware(host: ObservedHost, catalog: Catalog, name: str | None = None) -> HostHardware:
    """Translate one ObservedHost into the draft's view of its hardware (named `name`)."""
    notes: list[str] = []
    gpus = _gpus(host, catalog, notes)
    nics = _nics(host, catalog, notes)
    seen_numa = [d.numa for d in [*gpus, *nics]]
    numa_nodes = host.numa_nodes or (max(seen_numa) + 1 if seen_numa else 1)
    if len(notes) > MAX_NOTES:
        notes = [*notes[:MAX_NOTES], f"(and {len(notes) - MAX_NOTES} more)"]
    hw = HostHardware(
        name=name or spec_name(host.name),
        address=host.address or host.name,
        esxi_version=host.esxi_version,
        vendor=host.vendor,
        server_model=host.model or "unknown",
        numa_nodes=min(max(numa_nodes, 1), 16),
        gpus=gpus,
        nics=nics,
        server=catalog.server(host.vendor, host.model),
        notes=notes,
        vc_name=host.name,
    )
    apply_catalog_pairs(hw)
    return hw
