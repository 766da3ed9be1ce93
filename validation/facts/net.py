"""The node's network: interfaces with MTU and addresses, OFED, RDMA ports, NIC ATS, firmware."""

from __future__ import annotations

from validation import nic_firmware, parsers
from validation.facts.base import Fact


class NetInterfaces(Fact):
    """/sys/class/net and `ip`: per interface its MTU, MAC, state, speed, driver, PCI address
    and IPv4 addresses, and the default route's device (/proc/net/route where `ip` is not
    installed, as on the H200 machine)."""

    key = "nics"

    def command(self) -> str:
        # Shell built-ins (read, cd -P, ${x##*/}) where this used cat, readlink and basename:
        # eight processes an interface were about 30 ms of the node's CPU on a two-interface
        # VM, and a GPU node has many more; the output is the same, line for line.
        return (
            "for d in /sys/class/net/*; do n=${d##*/}; mtu= mac= oper= speed= drv= dev=;"
            ' IFS= read -r mtu 2>/dev/null <"$d/mtu";'
            ' IFS= read -r mac 2>/dev/null <"$d/address";'
            ' IFS= read -r oper 2>/dev/null <"$d/operstate";'
            ' IFS= read -r speed 2>/dev/null <"$d/speed";'
            ' drv=$(cd -P "$d/device/driver" 2>/dev/null && pwd);'
            ' dev=$(cd -P "$d/device" 2>/dev/null && pwd);'
            ' printf "if %s|%s|%s|%s|%s|%s\\n" "$n" "$mtu" "$mac" "$oper" "$speed"'
            ' "${drv##*/} ${dev##*/}"; done;'
            " ip -o -4 addr show 2>/dev/null |"
            ' while IFS= read -r l || [ -n "$l" ]; do printf "addr %s\\n" "$l"; done;'
            " ip route show default 2>/dev/null |"
            ' while IFS= read -r l || [ -n "$l" ]; do printf "route %s\\n" "$l"; done;'
            ' while read -r dev dst rest; do [ "$dst" = 00000000 ] &&'
            ' echo "route default dev $dev"; done < /proc/net/route 2>/dev/null; true'
        )

    @staticmethod
    def default() -> parsers.NetState:
        return parsers.NetState()

    def process(self, output: list[str]) -> parsers.NetState:
        return parsers.net_state("\n".join(output))


class Ofed(Fact):
    """`ofed_info -s`: the MLNX_OFED version ('5.4-3.1.0.0')."""

    key = "ofed"
    tool = "ofed_info"

    def command(self) -> str:
        return "ofed_info -s"

    def process(self, output: list[str]) -> str:
        return parsers.ofed_version("\n".join(output))


class RdmaPorts(Fact):
    """`ibdev2netdev`: every RDMA port, its net device and whether it is Up."""

    key = "rdma_ports"
    tool = "ibdev2netdev"

    def command(self) -> str:
        return "ibdev2netdev"

    @staticmethod
    def default() -> list[parsers.RdmaPort]:
        return []

    def process(self, output: list[str]) -> list[parsers.RdmaPort]:
        return parsers.ibdev2netdev("\n".join(output))


class IbRates(Fact):
    """/sys/class/infiniband/*/ports/*/rate: {device/port: Gb/s}."""

    key = "rdma_rates"

    def command(self) -> str:
        return (
            'for f in /sys/class/infiniband/*/ports/*/rate; do [ -e "$f" ] || continue;'
            ' echo "$f: $(cat "$f")"; done'
        )

    @staticmethod
    def default() -> dict[str, float]:
        return {}

    def process(self, output: list[str]) -> dict[str, float]:
        return parsers.ib_rates("\n".join(output))


class MlxconfigAts(Fact):
    """`mlxconfig q ATS_ENABLED`: {device: 'True(1)' or 'False(0)'}."""

    key = "nic_ats"
    tool = "mlxconfig"

    def command(self) -> str:
        return "mlxconfig q ATS_ENABLED"

    @staticmethod
    def default() -> dict[str, str]:
        return {}

    def process(self, output: list[str]) -> dict[str, str]:
        return parsers.mlxconfig_ats("\n".join(output))


class NicFirmware(nic_firmware.NicFirmware, Fact):
    """Firmware of every device-backed NIC (validation.nic_firmware)."""

    key = "nic_firmware"
    stderr = False


FACTS = (NetInterfaces, Ofed, RdmaPorts, IbRates, MlxconfigAts, NicFirmware)
