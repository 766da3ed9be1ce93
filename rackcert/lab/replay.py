"""A twin that serves a capture: the description the Go side builds, and what it cannot model.

The hosts go through the ordinary description (rackcert/lab/twin.py's shape), so the
twin's behaviours (passthrough, ATS, reboots, maintenance, vCLS, power-on rules) apply
to the captured hosts, with the server model, PCI functions and options taken from the
capture, not from the catalog or a spec. What a description cannot say travels in its
`replay` block (twin/capture.go). `static_lines` says, one line each, what the
twin serves as data only, without the behaviour a real vCenter has behind it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rackcert.core.capture.model import Capture, Host, HostDeviceGroup
from rackcert.core.capture.redact import served, sha256
from rackcert.core.spec import Spec
from rackcert.lab.twin import (
    DEFAULT_DATASTORE,
    DEFAULT_NETWORK,
    PAGE_SIZE,
    REBOOT_TIMING,
    TIME_SCALE,
    TWIN_VCENTER_RELEASES,
    TwinFiles,
)

# PCI classes whose behaviour the twin models: passthrough of GPUs (display/3D controllers),
# NICs (Ethernet, InfiniBand) and their bridges, and the chipset functions every host has.
MODELLED_CLASSES = {0x0300, 0x0302, 0x0200, 0x0207, 0x0C06, 0x0600, 0x0604}
MODELLED_DATASTORES = {"", "VMFS", "NFS", "NFS41", "OTHER"}


def _pci(host: Host) -> list[dict[str, Any]]:
    numa_of = {pci: node.id for node in host.numa.nodes for pci in node.pci}
    state = {p.id: p for p in host.passthrough}
    out = []
    for dev in host.pci_devices:
        p = state.get(dev.id)
        out.append(
            {
                "id": dev.id,
                "vendor_id": dev.vendor_id,
                "device_id": dev.device_id,
                "sub_vendor_id": dev.sub_vendor_id,
                "sub_device_id": dev.sub_device_id,
                "class_id": dev.class_id,
                "vendor_name": dev.vendor_name,
                "device_name": dev.device_name,
                "parent_bridge": dev.parent_bridge,
                "numa": numa_of.get(dev.id, -1),
                "passthru_capable": bool(p and p.capable),
                "passthru_enabled": bool(p and p.enabled),
                "passthru_active": bool(p and p.active),
            }
        )
    return out


def _host(host: Host) -> dict[str, Any]:
    ats = next((o for o in host.options if o.key == "VMkernel.Boot.atsSupport"), None)
    ats_on = ats is not None and str(ats.value).strip().lower() in ("true", "1", "yes", "on")
    return {
        "name": host.name,
        "vendor": host.hardware.vendor,
        "model": host.hardware.model,
        "esxi_version": host.product.version,
        "esxi_build": host.product.build,
        "numa_nodes": max(len(host.numa.nodes), 1),
        "ats": ats_on,
        "ats_option": ats is not None,
        "ats_type": "string" if ats is not None and ats.type == "string" else "bool",
        "memory_gb": max(host.hardware.memory_bytes >> 30, 1),
        "pci": _pci(host),
        "vgpu_types": host.vgpu_types,
        "maintenance": host.in_maintenance,
        "rebind_without_reboot": host.rebind_without_reboot,
        "graphics_type": host.graphics_type or "shared",
        "device_groups": [_group(g) for g in host.device_groups],
    }


def _group(group: HostDeviceGroup) -> dict[str, Any]:
    """A captured vendor device group as the twin serves one. A vGPU member names no PCI
    function, so it stands in as `<group>#<n>`: the twin lists and grants the group, but
    cannot tell which of them share a GPU (the partition rule is not replayed)."""
    vgpu = next((m.vgpu for m in group.members if m.vgpu), "") or ""
    gpus = [m.id or f"{group.name}#{i}" for i, m in enumerate(group.members)]
    return {
        "name": group.name,
        "description": group.description,
        "gpus": gpus,
        "vgpu": vgpu,
        "device_names": [m.device_name for m in group.members],
    }


def description_from_capture(
    capture: Capture,
    files: TwinFiles,
    *,
    port: int = 0,
    user: str = "rackcert",
    tls: bool = True,
) -> dict[str, Any]:
    """The twin's description for `capture`, listening on loopback `port` (0: any)."""
    cluster = capture.clusters[0].name if capture.clusters else "cluster0"
    served_vms = [v for v in capture.vms if v.host and capture.host(v.host)]
    replay = capture.model_dump(mode="json")
    replay["vms"] = [v.model_dump(mode="json") for v in served_vms]
    for vm in replay["vms"]:
        for item in vm["extra_config"]:
            if item["redacted"]:
                item["value"] = served(item["sha256"])
    return {
        "listen": f"127.0.0.1:{port}",
        "user": user,
        "password_file": str(files.password_file),
        "tls": tls,
        "cert_file": str(files.cert_file),
        "key_file": str(files.key_file),
        "datacenter": capture.datacenter or "DC0",
        "cluster": cluster,
        # The release the twin answers version negotiation as (a capture of another release
        # is served as 7.0.3's negotiation, with its own AboutInfo).
        "vcenter_version": capture.about.version
        if capture.about.version in TWIN_VCENTER_RELEASES
        else "7.0.3",
        "hosts": [_host(h) for h in capture.hosts],
        "vms": [],
        "templates": [],
        "datastores": [d.name for d in capture.datastores if d.name != DEFAULT_DATASTORE],
        "networks": [n.name for n in capture.networks if n.name != DEFAULT_NETWORK],
        "faults": {},
        "reboot": dict(REBOOT_TIMING),
        "clock": {"scale": TIME_SCALE},  # clones, maintenance mode, boots: a rack's, shrunk
        "agent_vms": 0,  # the captured vCLS agents are replayed as they were
        "page_size": PAGE_SIZE,
        "replay": replay,
    }


def restore_withheld(capture: Capture, wanted: dict[str, dict[str, str]]) -> int:
    """Put back withheld extraConfig values where `wanted[vm][key]` has the same sha256.

    `wanted` is what rackcert itself would write (the spec's guestinfo), so nothing the
    capture withheld is read back from it; a value nobody can derive stays withheld.
    Returns how many values were restored.
    """
    restored = 0
    for vm in capture.vms:
        for item in vm.extra_config:
            value = wanted.get(vm.name, {}).get(item.key)
            if item.redacted and value is not None and sha256(value) == item.sha256:
                item.value, item.redacted, item.sha256 = value, False, None
                restored += 1
    return restored


def static_lines(capture: Capture) -> list[str]:
    """What the twin serves as data only, without the behaviour behind it: one line each."""
    lines: list[str] = []
    classes: Counter[int] = Counter()
    names: dict[int, str] = {}
    for host in capture.hosts:
        for cls in {d.class_id for d in host.pci_devices if d.class_id not in MODELLED_CLASSES}:
            classes[cls] += 1
        for d in host.pci_devices:
            names.setdefault(d.class_id, f"{d.vendor_name} {d.device_name}".strip())
    for cls, count in sorted(classes.items()):
        lines.append(
            f"PCI class 0x{cls:04x} ({names[cls]}) on {count} host(s): listed and passthrough"
            " state served as captured; no device behaviour"
        )
    for ds in capture.datastores:
        if ds.type not in MODELLED_DATASTORES:
            lines.append(
                f"datastore {ds.name}: type {ds.type} served as data (summary.type); a local"
                " datastore underneath"
            )
    for net in capture.networks:
        if net.type != "Network":
            lines.append(f"port group {net.name}: a {net.type}, served as a standard port group")
    if capture.clusters:
        first = capture.clusters[0]
        if first.drs_enabled or first.rules:
            lines.append(
                f"cluster {first.name}: DRS {'on' if first.drs_enabled else 'off'},"
                f" {len(first.rules)} DRS rule(s) served as data; the twin migrates nothing"
            )
        for host in capture.hosts:
            if not host.cluster:
                lines.append(
                    f"host {host.name}: standalone (in no cluster), served in cluster {first.name}"
                )
        for other in capture.clusters[1:]:
            lines.append(
                f"cluster {other.name}: its {len(other.hosts)} host(s) served in cluster"
                f" {first.name} (the twin models one cluster)"
            )
    for vm in capture.vms:
        if not vm.host or not capture.host(vm.host):
            lines.append(f"VM {vm.name}: no host in the capture, not served")
        withheld = [e.key for e in vm.extra_config if e.redacted]
        if withheld:
            lines.append(
                f"VM {vm.name}: {len(withheld)} withheld extraConfig value(s) served as"
                f" <withheld sha256:...> ({', '.join(withheld)})"
            )
    return lines


def capture_description(
    path: Path, spec: Spec, files: TwinFiles, base: dict[str, Any], say: Callable[[str], None]
) -> dict[str, Any]:
    """`lab up --capture`: the capture's description, listening where `base` (the spec's) does.

    Says, one line each, what is served as static data only.
    """
    from rackcert.core.capture.model import load_capture

    capture = load_capture(path)
    desc = description_from_capture(capture, files, user=spec.vcenter.user, tls=base["tls"])
    desc["listen"] = base["listen"]
    desc["faults"] = base["faults"]
    for line in static_lines(capture):
        say(f"served as static data: {line}")
    say(
        f"serving capture {path} (taken {capture.taken_at}): {len(capture.hosts)} host(s),"
        f" {len(capture.vms)} VM(s) and template(s)"
    )
    return desc
