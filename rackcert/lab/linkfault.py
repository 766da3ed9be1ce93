"""A link fault planted on the running lab, and cleared: `rackcert lab link slow|clear|show`.

Why: burn-in and localisation are judged by whether they name a bad link alone, and a user
trying them on the lab needs a bad link to name. The lab's links are shaped with tc to the
line rate its spec declares (certification.line_rate_gbps, rackcert.lab.linkshape), so a
fault is the same tool at a fraction of that rate:
- a node's whole link (`slow NODE`): its NIC trained at half rate, or its cable to the switch;
  on three nodes or more every link of that node is slow and the node is named, on two the
  one link is;
- one cable between two nodes (`slow NODE --to PEER`): only that pair is slow.
`clear` puts every running node of the spec back at the line rate; `show` reads tc itself, so
it tells what the links are now, whoever shaped them.

A VM's host is found by its address, not its name: the network namespace (rackcert's own,
`rackcert-<owner>-<host>`) whose eth0 holds the spec's address for the VM, behind the lab's
bridge. The lab's guest agent names hosts after the VMs; tests' specs point lab VM names at
their own hosts, and this finds those too.

    node = find_node(spec, "lab-node2")     # InputError when the lab is not up
    slow(spec, node, 0.5)                   # "lab-node2: 50 Mbit/s both ways (0.5x ...)"
    clear(spec)
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import subprocess
from dataclasses import dataclass
from typing import Any

from rackcert.core.errors import InputError
from rackcert.lab import linkshape
from rackcert.lab.routes import bridge_routes
from rackcert.lab.sshhosts.network import NETNS_PREFIX, netns_list


@dataclass(frozen=True)
class LabNode:
    """What rackcert.lab.linkshape needs of a host: its VM's name, namespace and address."""

    name: str
    netns: str
    address: str


def _json_out(*argv: str) -> list[dict[str, Any]]:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)
    try:
        value = json.loads(done.stdout or "[]")
    except ValueError:
        return []
    return value if isinstance(value, list) else []


def _eth0_addresses(netns: str) -> set[str]:
    rows = _json_out("ip", "-j", "-n", netns, "-4", "addr", "show", "dev", "eth0")
    return {a.get("local", "") for r in rows for a in r.get("addr_info") or []}


def line_mbit(spec: Any) -> float:
    """The lab's line rate in Mbit/s; InputError when the spec declares none (its links are
    then not shaped, and a fraction of nothing is no fault)."""
    rate = spec.certification.line_rate_gbps
    if not rate:
        raise InputError(
            "lab link: the spec declares no certification.line_rate_gbps, so the lab's links"
            " are not shaped and have no rate to take a fraction of"
        )
    return float(rate) * 1000


def require_root() -> None:
    if os.geteuid() != 0:
        raise InputError("lab link needs root (tc on the lab's links, in their namespaces)")


def find_node(spec: Any, name: str, namespaces: list[str] | None = None) -> LabNode:
    """The running host of the spec's VM `name`; InputError naming what is missing."""
    vm = next((v for v in spec.vms if v.name == name), None)
    if vm is None:
        known = ", ".join(v.name for v in spec.vms) or "none"
        raise InputError(f"lab link: no VM {name!r} in the spec (its VMs: {known})")
    address = str(vm.address)
    if not bridge_routes(address):
        raise InputError(
            f"the lab is not up: rackcert lab up (then provision; {name} at {address} is not"
            " routed through the lab's bridge; no link was changed)"
        )
    ours = [n for n in (netns_list() if namespaces is None else namespaces)
            if n.startswith(NETNS_PREFIX)]  # fmt: skip
    found = [n for n in ours if address in _eth0_addresses(n)]
    if len(found) != 1:
        why = "no host answers there" if not found else f"{len(found)} hosts claim it"
        raise InputError(
            f"lab link: {name} at {address}: {why} (is the VM provisioned and powered on?)"
        )
    return LabNode(name, found[0], address)


def running_nodes(spec: Any) -> list[LabNode]:
    """Every VM of the spec whose host runs; InputError when none does (the lab is down)."""
    namespaces = netns_list()
    out = []
    for vm in spec.vms:
        try:
            out.append(find_node(spec, vm.name, namespaces))
        except InputError:
            continue
    if not out:
        raise InputError(
            "the lab is not up: rackcert lab up (then provision; none of the spec's VMs has a"
            " running host; no link was changed)"
        )
    return out


def slow(spec: Any, node: LabNode, fraction: float, peer: LabNode | None = None) -> str:
    """Plant the fault: `node`'s link (or only its cable to `peer`) at `fraction` of the
    line rate, both ways. Returns what was done, in a line."""
    if not 0 < fraction < 1:
        raise InputError(f"lab link slow --fraction {fraction:g}: between 0 and 1 (0.5: half)")
    line = line_mbit(spec)
    mbit = round(line * fraction, 3)
    if peer is None:
        linkshape.shape_host(node, mbit)
        return (f"{node.name}: its link at {mbit:g} Mbit/s both ways ({fraction:g}x the line rate"
                f" {line:g} Mbit/s, certification.line_rate_gbps)")  # fmt: skip
    if peer.name == node.name:
        raise InputError(f"lab link slow {node.name} --to {peer.name}: a link needs two nodes")
    for end in (node, peer):  # both ends' own links at the line rate first (a node fault gone)
        linkshape.shape_host(end, line)
    linkshape.shape_link(node, peer, mbit, line=line)
    return (f"{node.name}<->{peer.name}: that link at {mbit:g} Mbit/s both ways ({fraction:g}x"
            f" the line rate {line:g} Mbit/s); their other links at the line rate")  # fmt: skip


def clear(spec: Any) -> list[LabNode]:
    """Every running node's link back at the spec's line rate (what `lab up` shapes)."""
    nodes = running_nodes(spec)
    for n in nodes:
        linkshape.unshape(n)  # a one-cable fault's htb goes too, not only a node's tbf
    linkshape.shape_lab(nodes, spec)
    return nodes


# -- reading tc ---------------------------------------------------------------------------------
def _mbit(rate_bytes: Any) -> float | None:
    return round(float(rate_bytes) * 8 / 1e6, 3) if isinstance(rate_bytes, int | float) else None


def _root_qdisc(where: list[str], dev: str) -> dict[str, Any]:
    rows = _json_out("tc", *where, "-j", "qdisc", "show", "dev", dev)
    return next((r for r in rows if r.get("root")), {})


def _htb_rates(node: LabNode) -> tuple[float | None, float | None, str | None]:
    """A shape_link's classes on the node's eth0: the default (1:10), the slow one (1:20),
    and the address its u32 filter sends to the slow one."""
    # iproute2 6.1 prints htb classes as text even with -j: `class htb 1:20 ... rate 25Mbit`
    rate = {
        cls: _text_mbit(value)
        for cls, value in re.findall(r"class htb (\S+) .*?\brate (\S+)", _tc_text(node, "class"))
    }
    text = _tc_text(node, "filter")
    # u32 prints its key as `match 0a4d000c/ffffffff at 16`: the destination address in hex
    keys = re.findall(r"match ([0-9a-f]{8})/ffffffff at 16", text)
    dst = str(ipaddress.IPv4Address(int(keys[0], 16))) if keys else None
    return rate.get("1:10"), rate.get("1:20"), dst


def _tc_text(node: LabNode, what: str) -> str:
    argv = ["tc", "-n", node.netns, what, "show", "dev", "eth0"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False).stdout


_UNITS = {"bit": 1e-6, "kbit": 1e-3, "mbit": 1.0, "gbit": 1e3}


def _text_mbit(rate: str) -> float | None:
    """tc's printed rate (`25Mbit`, `500Kbit`, `1Gbit`) in Mbit/s."""
    m = re.fullmatch(r"([0-9.]+)([KMG]?bit)", rate, flags=re.IGNORECASE)
    return round(float(m.group(1)) * _UNITS[m.group(2).lower()], 3) if m else None


def _rate(mbit: float | None) -> str:
    return f"{mbit:g} Mbit/s" if mbit is not None else "? Mbit/s"


def _tbf(qdisc: dict[str, Any]) -> str:
    if qdisc.get("kind") == "tbf":
        return _rate(_mbit((qdisc.get("options") or {}).get("rate")))
    return "unshaped" if qdisc.get("kind") in (None, "noqueue", "pfifo_fast") else qdisc["kind"]


def show(spec: Any) -> list[str]:
    """One line per running node, the rates its link has now as tc holds them, then the
    line rate the spec declares."""
    nodes = running_nodes(spec)
    names = {n.address: n.name for n in nodes}
    out = []
    for n in nodes:
        to_it = _tbf(_root_qdisc([], linkshape.bridge_veth(n)))
        own = _root_qdisc(["-n", n.netns], "eth0")
        from_it = _tbf(own)
        if own.get("kind") == "htb":
            line, slow_rate, dst = _htb_rates(n)
            peer = names.get(dst or "", dst or "?")
            from_it = f"{_rate(line)}, to {peer} {_rate(slow_rate)}"
        out.append(f"{n.name} ({n.address}): to it {to_it}; from it {from_it}")
    rate = spec.certification.line_rate_gbps
    if rate:
        out.append(f"line rate {float(rate) * 1000:g} Mbit/s (certification.line_rate_gbps)")
    return out
