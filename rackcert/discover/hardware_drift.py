"""Hardware drift: what the rack in vCenter has that the spec in use does not say, and back.

Why: after a repair or an upgrade a GPU may be missing, a card may sit in another slot,
an ESXi host may run another version. `rackcert spec discover --diff SPEC` compares the
discovered draft with the spec in use, host by host (profile names do not matter, only
what each host's profile says), and exits non-zero when they differ.

Compared per host: address, ESXi version, server model, vendor, NUMA node count; each
GPU by PCI address (model, memory, NUMA node, NVLink peer) and each NIC (model, ports,
NUMA node). A device gone from one address and a device of the same model new at
another is reported as moved. Not compared: what vSphere cannot see (NIC line rate; the
NVLink peer of hosts whose pairs neither the catalog nor --nodes could tell).

Example:
    for d in hardware_drift(existing.spec, draft_spec):
        print(d.line())    # esx03: GPU removed: 0000:ca:00.0 NVIDIA A100 PCIe 80GB
"""

from __future__ import annotations

from dataclasses import dataclass

from rackcert.core.spec import Gpu, HardwareProfile, Host, Nic, Spec
from rackcert.discover.inventory_to_spec import natural_key


@dataclass(frozen=True)
class Drift:
    host: str
    kind: str  # added, removed, moved, changed
    what: str  # host, GPU, NIC
    detail: str

    def line(self) -> str:
        return f"{self.host}: {self.what} {self.kind}: {self.detail}"


def _gpu_text(g: Gpu) -> str:
    return f"{g.pci} {g.model}"


def _fields(old: object, new: object, names: tuple[str, ...]) -> list[str]:
    out = []
    for name in names:
        a, b = getattr(old, name), getattr(new, name)
        if a != b:
            out.append(f"{name} {a} -> {b}")
    return out


def _devices(
    host: str,
    what: str,
    old: list[Gpu] | list[Nic],
    new: list[Gpu] | list[Nic],
    fields: tuple[str, ...],
) -> list[Drift]:
    before = {d.pci: d for d in old}
    after = {d.pci: d for d in new}
    gone = [before[p] for p in sorted(set(before) - set(after))]
    came = [after[p] for p in sorted(set(after) - set(before))]
    out: list[Drift] = []
    for dev in list(gone):
        twin = next((c for c in came if c.model == dev.model), None)
        if twin is not None:
            out.append(Drift(host, "moved", what, f"{dev.model} {dev.pci} -> {twin.pci}"))
            gone.remove(dev)
            came.remove(twin)
    out += [Drift(host, "removed", what, f"{d.pci} {d.model}") for d in gone]
    out += [Drift(host, "added", what, f"{d.pci} {d.model}") for d in came]
    for pci in sorted(set(before) & set(after)):
        changes = _fields(before[pci], after[pci], fields)
        if changes:
            out.append(Drift(host, "changed", what, f"{pci}: {', '.join(changes)}"))
    return out


def _host(
    old_host: Host,
    old: HardwareProfile,
    new_host: Host,
    new: HardwareProfile,
    nvlink: bool,
) -> list[Drift]:
    name = old_host.name
    out = []
    changes = _fields(old_host, new_host, ("esxi_version",))
    changes += _fields(old, new, ("server_model", "vendor", "numa_nodes"))
    if changes:
        out.append(Drift(name, "changed", "host", ", ".join(changes)))
    gpu_fields = ("model", "memory_gb", "numa") + (("nvlink_peer",) if nvlink else ())
    out += _devices(name, "GPU", old.gpus, new.gpus, gpu_fields)
    out += _devices(name, "NIC", old.nics, new.nics, ("model", "ports", "numa"))
    return out


def hardware_drift(
    existing: Spec, found: Spec, *, nvlink_known: set[str] | None = None
) -> list[Drift]:
    """Differences in hardware, host by host, matched by address (what vCenter calls the
    host), else by name. `nvlink_known`: names (in `found`) of hosts whose pairs are known;
    the others' nvlink_peer is not compared (None: all are)."""
    new_by_addr = {h.address.lower(): h for h in found.hosts}
    new_by_name = {h.name: h for h in found.hosts}
    matched: set[str] = set()
    out: list[Drift] = []
    for old_host in sorted(existing.hosts, key=lambda h: natural_key(h.name)):
        new_host = new_by_addr.get(old_host.address.lower()) or new_by_name.get(old_host.name)
        if new_host is None or new_host.name in matched:
            out.append(
                Drift(old_host.name, "removed", "host", f"{old_host.address} is not in vCenter")
            )
            continue
        matched.add(new_host.name)
        nvlink = nvlink_known is None or new_host.name in nvlink_known
        out += _host(
            old_host,
            existing.profile(old_host.profile),
            new_host,
            found.profile(new_host.profile),
            nvlink,
        )
    for new_host in sorted(found.hosts, key=lambda h: natural_key(h.name)):
        if new_host.name not in matched:
            gpus = len(found.profile(new_host.profile).gpus)
            out.append(
                Drift(
                    new_host.name,
                    "added",
                    "host",
                    f"{new_host.address} with {gpus} GPU(s) is in vCenter, not in the spec",
                )
            )
    return out
