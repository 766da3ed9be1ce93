"""The digest of what provision reads: `provision --rehearsed RUN` compares it.

A rehearsal is only worth something while the inventory it rehearsed on is the one
provision will meet. The digest covers the fields the planner and apply read from
discovery (rackcert.core.observed.Inventory): hosts' devices, passthrough state, ATS,
maintenance, connection, pending reboot, graphics; VMs' and templates' configuration.
It leaves out what changes without changing a plan: boot times, Tools' guest IP, how
long discovery took, managed-object ids, device keys, and the VMs vCenter extensions
manage (vCLS agents move and restart on their own; provision never touches them).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from rackcert.core.observed import Inventory

_HOST_VOLATILE = ("moid", "boot_time")
_VM_VOLATILE = ("moid", "guest_ip")


def provision_view(inventory: Inventory) -> dict[str, Any]:
    """The part of an inventory provision reads, in a stable order."""
    data = inventory.model_dump(mode="json")
    hosts = []
    for host in data.get("hosts", []):
        for key in _HOST_VOLATILE:
            host.pop(key, None)
        host["vm_names"] = [n for n in host.get("vm_names", []) if not _managed(inventory, n)]
        hosts.append(host)
    vms = []
    for vm in data.get("vms", []) + data.get("templates", []):
        if vm.get("managed_by"):
            continue
        for key in _VM_VOLATILE:
            vm.pop(key, None)
        for group in ("passthrough", "disks", "nics"):
            for device in vm.get(group, []):
                device.pop("key", None)
        vms.append(vm)
    return {
        "vcenter": data.get("vcenter", ""),
        "api_version": data.get("api_version", ""),
        "hosts": sorted(hosts, key=lambda h: h["name"]),
        "vms": sorted(vms, key=lambda v: (v.get("template", False), v["name"])),
    }


def _managed(inventory: Inventory, name: str) -> bool:
    vm = inventory.vm(name)
    return bool(vm and vm.managed_by)


def inventory_digest(inventory: Inventory) -> str:
    """sha256 over `provision_view`, as `sha256:<hex>`."""
    text = json.dumps(provision_view(inventory), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()
