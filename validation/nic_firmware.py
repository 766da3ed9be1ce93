"""NIC firmware of a node, for the certified matrix's "NIC firmware" row (facts.json).

Read the way the NIC vendors document it: `ethtool -i IFACE` prints the driver's view
(`firmware-version: 22.31.1014 (DEL0000000027)` on a ConnectX-6 Dx: version, then the
board's PSID), for every interface backed by a device; where NVIDIA's MFT tools are
installed, `mlxfwmanager --query` (its "FW" line per device) or `flint -d PCI query`
(its "FW Version:" line) answer for Mellanox functions that no netdev shows (an
InfiniBand-only port). Virtual NICs (vmxnet3, virtio, veth) report no firmware and are
left out, so a rack of VMs without passthrough NICs shows no version rather than a
misleading one.
"""

from __future__ import annotations

import re
from typing import Any

from pyinfra.api import FactBase

# One shell round trip; every tool is optional (`command -v`), and nothing fails the fact.
_COMMAND = r"""
for d in /sys/class/net/*; do
  [ -e "$d/device" ] || continue
  echo "## ethtool ${d##*/}"; ethtool -i "${d##*/}" 2>/dev/null
done
if command -v mlxfwmanager >/dev/null 2>&1; then
  echo "## mlxfwmanager"; mlxfwmanager --query 2>/dev/null
elif command -v flint >/dev/null 2>&1; then
  for v in /sys/bus/pci/devices/*/vendor; do
    [ "$(cat "$v")" = 0x15b3 ] || continue
    a=${v%/vendor}; a=${a##*/}
    case "$a" in *.0) echo "## flint $a"; flint -d "$a" query 2>/dev/null;; esac
  done
fi
true
""".strip()

_NO_FIRMWARE = {"", "n/a", "na", "none", "unknown"}


def parse_nic_firmware(output: list[str]) -> dict[str, Any]:
    """{"version": distinct versions joined by "; ", "devices": {name: {...}}} from `_COMMAND`.

    Example:
        parse_nic_firmware(["## ethtool ens1f0", "driver: mlx5_core",
                            "firmware-version: 22.31.1014 (DEL0000000027)",
                            "bus-info: 0000:4b:00.0"])["version"] == "22.31.1014"
    """
    devices: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    tool = ""
    for raw in output:
        line = raw.rstrip()
        if line.startswith("## "):
            tool, _, name = line[3:].partition(" ")
            current = devices.setdefault(name or tool, {"source": tool}) if name else None
            continue
        if tool == "mlxfwmanager":
            _mlxfwmanager_line(line, devices)
            continue
        if current is None or ":" not in line:
            continue
        key, _, value = line.partition(":")
        key, value = key.strip().lower(), value.strip()
        if tool == "ethtool" and key in ("driver", "firmware-version", "bus-info"):
            current[{"firmware-version": "firmware", "bus-info": "pci"}.get(key, key)] = value
        elif tool == "flint" and key == "fw version":
            current["firmware"] = value
    kept = {
        name: info
        for name, info in devices.items()
        if info.get("firmware", "").lower() not in _NO_FIRMWARE
    }
    versions = sorted({info["firmware"].split()[0] for info in kept.values()})
    return {"version": "; ".join(versions), "devices": kept}


def _mlxfwmanager_line(line: str, devices: dict[str, dict[str, str]]) -> None:
    """mlxfwmanager --query: "Device #1:", "PCI Device Name: 0000:4b:00.0", "FW  22.31.1014 N/A"."""
    text = line.strip()
    if text.startswith("Device #"):
        devices[text.rstrip(":")] = {"source": "mlxfwmanager"}
        return
    if not devices:
        return
    last = devices[list(devices)[-1]]
    if last.get("source") != "mlxfwmanager":
        return
    match = re.match(r"^FW\s+(\S+)", text)
    if match and "firmware" not in last:
        last["firmware"] = match.group(1)
    elif text.startswith("PCI Device Name:"):
        last["pci"] = text.split(":", 1)[1].strip()


class NicFirmware(FactBase):
    """Firmware of every device-backed NIC: ethtool -i, then mlxfwmanager or flint."""

    def command(self) -> str:
        return _COMMAND

    @staticmethod
    def default() -> dict[str, Any]:
        return {"version": "", "devices": {}}

    def process(self, output: list[str]) -> dict[str, Any]:
        return parse_nic_firmware(output)
