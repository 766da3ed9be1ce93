"""Inventory (+ catalog) -> spec draft: a dict in the examples' key order plus its comments.

Why pure: the draft is decided by what vCenter reported and the catalog, nothing else,
so it is tested on Inventory objects built in the test, and re-running discover on an
unchanged rack writes the same bytes (hosts in natural name order, devices by PCI
address, no timestamps).

What the draft holds:
- one hardware profile per distinct hardware (hosts with equal GPUs, NICs, NUMA layout,
  model and NVLink pairs share one), named `<server prefix>-<gpu>x<n>`;
- hosts with their ESXi version;
- a default VM layout that follows the NVLink pairs: one 2-GPU VM (`nvlink: required`)
  per bridged pair, one 1-GPU VM per unpaired GPU, each with its GPUs named; guest
  addresses are `<vm>.invalid` placeholders (RFC 6761: never resolves) that validate;
- the vCenter endpoint with the password by reference (env var or file);
- the guest stack, storage and certification thresholds as commented placeholders.

Example:
    draft = inventory_to_spec(inventory, Endpoint(host="vc.example", user="admin"), "rack-a")
    text = render(draft.data, draft.notes, draft.header)
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rackcert.core.observed import Inventory
from rackcert.discover.catalog import Catalog
from rackcert.discover.hardware import HostHardware, host_hardware, host_names
from rackcert.discover.yaml_writer import Notes

TEMPLATE_PAIR = "dl-2gpu-nvlink"
TEMPLATE_SINGLE = "dl-1gpu"
PLACEHOLDER_DOMAIN = "invalid"
_LIST_HOSTS = 6


@dataclass(frozen=True)
class Endpoint:
    """How the draft reaches vCenter; the password only by reference."""

    host: str
    user: str
    port: int = 443
    protocol: str = "https"
    password_env: str | None = "RACKCERT_VCENTER_PASSWORD"
    password_file: str | None = None
    datacenter: str | None = None
    cluster: str | None = None
    tls_verify: bool = True
    ca_file: str | None = None
    thumbprint: str | None = None

    def to_spec(self) -> dict[str, Any]:
        out: dict[str, Any] = {"host": self.host, "port": self.port}
        if self.protocol != "https":
            out["protocol"] = self.protocol
        out["user"] = self.user
        if self.password_file:
            out["password_file"] = self.password_file
        else:
            out["password_env"] = self.password_env or "RACKCERT_VCENTER_PASSWORD"
        for key in ("datacenter", "cluster"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        tls: dict[str, Any] = {"verify": self.tls_verify}
        if self.ca_file:
            tls["ca_file"] = self.ca_file
        if self.thumbprint:
            tls["thumbprint"] = self.thumbprint
        out["tls"] = tls
        return out


@dataclass
class Draft:
    data: dict[str, Any]
    notes: Notes
    header: list[str] = field(default_factory=list)
    hardware: list[HostHardware] = field(default_factory=list)


def natural_key(text: str) -> list[Any]:
    """esx2 before esx10: digits compare as numbers."""
    return [int(p) if p.isdigit() else p.lower() for p in re.split(r"(\d+)", text)]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:30] or "server"


def _profile_base(hw: HostHardware) -> str:
    prefix = hw.server.profile_prefix if hw.server else _slug(hw.server_model)
    if not hw.gpus:
        return f"{prefix}-nogpu"
    counts = Counter(g.short for g in hw.gpus)
    return f"{prefix}-" + "-".join(f"{s}x{n}" for s, n in sorted(counts.items()))


def _gpu_entry(g: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"pci": g.pci, "model": g.model, "memory_gb": g.memory_gb}
    entry["numa"] = g.numa
    if g.nvlink_peer:
        entry["nvlink_peer"] = g.nvlink_peer
    return entry


def _nic_entry(n: Any) -> dict[str, Any]:
    return {
        "pci": n.pci,
        "model": n.model,
        "ports": n.ports,
        "speed_gbps": n.speed_gbps,
        "numa": n.numa,
    }


def _host_list(names: list[str]) -> str:
    shown = ", ".join(names[:_LIST_HOSTS])
    more = len(names) - _LIST_HOSTS
    return shown + (f" and {more} more" if more > 0 else "")


def _pair_note(hw: HostHardware, sources: set[str]) -> list[str]:
    if not hw.gpus:
        return []
    if "nodes" in sources:
        return [
            "nvlink_peer: as `nvidia-smi topo -m` showed it inside the VMs (--nodes);",
            "GPUs that no VM held keep the catalog's pairs.",
        ]
    if hw.pair_source == "catalog" and hw.server:
        return [
            f"nvlink_peer: from the server catalog ({hw.server.name});",
            "vSphere 7 cannot see NVLink bridges. Prove the pairs once VMs run:",
            "rackcert spec discover --nodes ...",
        ]
    return [
        "nvlink_peer: unknown. vSphere 7 does not report NVLink bridges and this",
        "server model is not in the catalog. Set nvlink_peer on both GPUs of each",
        "bridged pair, add the model to a catalog file (--catalog), or run",
        "`rackcert spec discover --nodes` once VMs run.",
    ]


def _profiles(
    hardware: list[HostHardware], notes: Notes, pair_sources: dict[str, set[str]]
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Group hosts by equal hardware; return the profiles and host name -> profile name."""
    groups: dict[tuple, list[HostHardware]] = {}
    for hw in hardware:
        groups.setdefault(hw.profile_key(), []).append(hw)
    taken: Counter[str] = Counter()
    profiles: list[dict[str, Any]] = []
    host_profile: dict[str, str] = {}
    for index, members in enumerate(groups.values()):
        first = members[0]
        base = _profile_base(first)
        taken[base] += 1
        name = base if taken[base] == 1 else f"{base}-{taken[base]}"
        for hw in members:
            host_profile[hw.name] = name
        profile: dict[str, Any] = {"name": name, "server_model": first.server_model}
        profile["vendor"] = first.vendor
        profile["numa_nodes"] = first.numa_nodes
        profile["gpus"] = [_gpu_entry(g) for g in first.gpus]
        profile["nics"] = [_nic_entry(n) for n in first.nics]
        profiles.append(profile)
        where = ("hardware_profiles", index)
        notes.before(where, f"{_n(len(members), 'host')}: {_host_list([h.name for h in members])}")
        sources = set().union(*(pair_sources.get(h.name, set()) for h in members))
        pair_lines = _pair_note(first, sources)
        if pair_lines:
            notes.before((*where, "gpus"), *pair_lines)
        if first.nics:
            notes.before(
                (*where, "nics"),
                "speed_gbps: the catalog's default for the part (vSphere cannot read",
                "the line rate of a card in passthrough); check it.",
            )
        host_notes = sorted({n for h in members for n in h.notes})
        if host_notes:
            notes.before((*where, "numa_nodes"), "Seen and worth a look:", *host_notes)
    return profiles, host_profile


def _vms(hardware: list[HostHardware]) -> tuple[list[dict[str, Any]], set[str]]:
    """One VM per NVLink pair, one per unpaired GPU; GPUs named so the layout is explicit."""
    vms: list[dict[str, Any]] = []
    used: set[str] = set()
    for hw in hardware:
        groups: list[list[str]] = []
        done: set[str] = set()
        for gpu in hw.gpus:
            if gpu.pci in done:
                continue
            peer = hw.gpu(gpu.nvlink_peer) if gpu.nvlink_peer else None
            group = sorted([gpu.pci, peer.pci]) if peer else [gpu.pci]
            done.update(group)
            groups.append(group)
        for number, gpus in enumerate(groups, start=1):
            template = TEMPLATE_PAIR if len(gpus) == 2 else TEMPLATE_SINGLE
            used.add(template)
            name = f"{hw.name[:56]}-vm{number}"
            vms.append(
                {
                    "name": name,
                    "template": template,
                    "host": hw.name,
                    "address": f"{name}.{PLACEHOLDER_DOMAIN}",
                    "gpus": gpus,
                }
            )
    return vms, used


def _templates(used: set[str]) -> list[dict[str, Any]]:
    templates = []
    if TEMPLATE_SINGLE in used:
        templates.append(
            {
                "name": TEMPLATE_SINGLE,
                "vcpus": 32,
                "memory_gb": 64,
                "gpus": 1,
                "nvlink": "none",
                "nic": "vmxnet3",
            }
        )
    if TEMPLATE_PAIR in used:
        templates.append(
            {
                "name": TEMPLATE_PAIR,
                "vcpus": 32,
                "memory_gb": 64,
                "gpus": 2,
                "nvlink": "required",
                "nic": "vmxnet3",
            }
        )
    return templates


def _n(count: int, what: str) -> str:
    return f"{count} {what}{'' if count == 1 else 's'}"


def _header(endpoint: Endpoint, hardware: list[HostHardware], profiles: int) -> list[str]:
    gpus = sum(len(h.gpus) for h in hardware)
    pairs = sum(1 for h in hardware for g in h.gpus if g.nvlink_peer) // 2
    return [
        f"Drafted by `rackcert spec discover` from vCenter {endpoint.host}:{endpoint.port}:",
        f"{_n(len(hardware), 'host')}, {_n(profiles, 'hardware profile')}, {_n(gpus, 'GPU')},"
        f" {_n(pairs, 'NVLink pair')}.",
        "Hardware (profiles, hosts) is what vCenter reported, named through the catalog",
        "(rackcert/discover/catalog/). VM sizes and addresses, the guest stack and storage",
        "are placeholders: edit them, then `rackcert spec check` this file.",
    ]


def build_draft(
    hardware: list[HostHardware],
    endpoint: Endpoint,
    name: str,
    *,
    pair_sources: dict[str, set[str]] | None = None,
) -> Draft:
    """The draft for hosts already translated by `host_hardware` (and maybe --nodes)."""
    hardware = sorted(hardware, key=lambda h: natural_key(h.name))
    notes = Notes()
    profiles, host_profile = _profiles(hardware, notes, pair_sources or {})
    hosts = [
        {
            "name": hw.name,
            "address": hw.address,
            "profile": host_profile[hw.name],
            "esxi_version": hw.esxi_version,
        }
        for hw in hardware
    ]
    vms, used = _vms(hardware)
    data: dict[str, Any] = {
        "apiVersion": "rackcert/v1",
        "kind": "Rack",
        "metadata": {
            "name": name,
            "description": f"Discovered from vCenter {endpoint.host}",
        },
        "vcenter": endpoint.to_spec(),
        "hardware_profiles": profiles,
        "hosts": hosts,
        "vm_templates": _templates(used),
        "vms": vms,
        "guest": {"os": "ubuntu-22.04", "ssh": {"user": "root"}},
        "network": {"mtu": 9000},
        "certification": {"scaling_efficiency_min": 0.9},
    }
    _placeholder_notes(notes, hardware, bool(vms))
    return Draft(data, notes, _header(endpoint, hardware, len(profiles)), hardware)


def _placeholder_notes(notes: Notes, hardware: list[HostHardware], have_vms: bool) -> None:
    notes.before(
        ("vcenter",), "", "The password is read from this variable (or file), never stored."
    )
    notes.before(("hardware_profiles",), "")
    notes.before(("hosts",), "")
    notes.before(
        ("vm_templates",),
        "",
        "Default layout: one 2-GPU VM per NVLink pair, one 1-GPU VM per unpaired GPU.",
        "Placeholder sizing (the Dell design's 32 vCPU / 64 GB); set nic: passthrough to give",
        "each VM a ConnectX port for GPUDirect RDMA.",
    )
    if have_vms:
        notes.before(
            ("vms",),
            "",
            "Addresses are placeholders (.invalid never resolves): set each VM's guest address.",
        )
    notes.before(("guest",), "", "Guest stack: placeholders; pin what the certified matrix names.")
    notes.eol(("guest", "os"), "placeholder")
    notes.before(
        ("guest", "ssh"),
        "nvidia_driver: 470.82.01",
        'cuda: "11.4"',
        "ofed: 5.4-3.1.0.0",
        "container_toolkit: 1.14.3",
        "container_runtime: docker",
        "horovod: true",
    )
    notes.before(("guest", "ssh", "user"), "key_file: ~/.ssh/rackcert_ed25519")
    notes.before(
        ("network",),
        "",
        "storage:",
        "  nfs:",
        "    server: filer.example.internal",
        "    export: /ifs/data/imagenet",
        "    mount_point: /mnt/data",
    )
    notes.eol(("network", "mtu"), "placeholder: the data network's MTU")
    refs = sorted({h.server.certified_reference for h in hardware if h.server} - {None})
    lines = [f"reference: {r}  # certified-matrix entry for this server" for r in refs]
    notes.before(("certification",), "")
    notes.before(
        ("certification", "scaling_efficiency_min"),
        *lines,
        "allreduce_busbw_fraction_min: 0.7",
        "resnet50_images_per_gpu_min: 2500",
    )


def inventory_to_spec(
    inventory: Inventory,
    endpoint: Endpoint,
    name: str,
    catalog: Catalog,
    *,
    cluster_hosts: set[str] | None = None,
) -> Draft:
    """Inventory -> Draft; `cluster_hosts` (names) keeps only those hosts when given."""
    return build_draft(inventory_hardware(inventory, catalog, cluster_hosts), endpoint, name)


def inventory_hardware(
    inventory: Inventory, catalog: Catalog, cluster_hosts: set[str] | None = None
) -> list[HostHardware]:
    """Every (kept) host of the inventory translated, named for the spec."""
    hosts = [h for h in inventory.hosts if cluster_hosts is None or h.name in cluster_hosts]
    names = host_names([h.name for h in hosts])
    return [host_hardware(h, catalog, names[h.name]) for h in hosts]
