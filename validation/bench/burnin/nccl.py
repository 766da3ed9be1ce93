"""Which transport NCCL really used, from its own log (`NCCL_DEBUG=INFO`), judged against the spec.

Why: NCCL falls back without an error. After an OS upgrade GPUDirect RDMA was silently off
and allreduce busbw fell from ~180 to ~10 GB/s (NVIDIA/nccl #1676); a rack whose ranks talk
over sockets passes every functional check. NCCL's INFO lines say it per rank:

    node1:4242:4250 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
    node1:4242:4250 [0] NCCL INFO Using network IB
    node1:4242:4250 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA
    node1:4242:4250 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/CUMEM/read
    node1:4242:4250 [0] NCCL INFO Channel 01 : 1[1] -> 2[0] via SHM/direct/direct
    node2:5151:5160 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/Socket/0

A rank is one `host:pid`; its transport to each peer is the `via` word (NET/IB, NET/Socket,
P2P, SHM, with `GDRDMA` where GPUDirect RDMA is on). A rank whose network peers go over
NET/Socket fails; where the spec has RDMA, a NET/IB peer without GDRDMA fails too.

    ranks = parse(text); problems = judge(ranks, rdma=True)
"""

from __future__ import annotations

import re
from typing import Any

_PREFIX = r"^(?:\s*\d+: )?(?P<host>[^\s:]+):(?P<pid>\d+):\d+ \[\d+\] NCCL INFO "
VERSION = re.compile(_PREFIX + r"NCCL version (?P<v>\S+)")
NETWORK = re.compile(_PREFIX + r"Using network (?P<net>\S+)")
CHANNEL = re.compile(
    _PREFIX + r"Channel \d+(?:/\d+)? ?: (?P<src>\d+)\[[^\]]*\] -> (?P<dst>\d+)\[[^\]]*\]"
    r"(?: \[(?:send|receive)\])? via (?P<via>\S+)"
)


def kind_of(via: str) -> str:
    """`NET/IB/0/GDRDMA` -> `NET/IB`; `P2P/CUMEM/read` -> `P2P`; `SHM/direct/direct` -> `SHM`."""
    parts = via.split("/")
    return "/".join(parts[:2]) if parts[0] == "NET" else parts[0]


def parse(text: str) -> list[dict[str, Any]]:
    """Per rank (`host:pid`): NCCL version, network, transport per peer rank, GDR on any."""
    ranks: dict[str, dict[str, Any]] = {}

    def rank(m: re.Match[str]) -> dict[str, Any]:
        key = f"{m.group('host')}:{m.group('pid')}"
        return ranks.setdefault(
            key, {"rank": key, "version": None, "transports": {}, "net": None, "gdr": False}
        )

    for line in text.splitlines():
        if m := VERSION.search(line):
            rank(m)["version"] = m.group("v")
        elif m := NETWORK.search(line):
            rank(m)["net"] = m.group("net")
        elif m := CHANNEL.search(line):
            r = rank(m)
            via = m.group("via")
            r["transports"][m.group("dst")] = kind_of(via)
            r["gdr"] = r["gdr"] or "GDRDMA" in via
    return list(ranks.values())


def judge(ranks: list[dict[str, Any]], *, rdma: bool) -> list[str]:
    """One line per rank that is not on the spec's transport (an empty list: all are)."""
    out = []
    for r in ranks:
        kinds = set(r["transports"].values())
        if "NET/Socket" in kinds or (r.get("net") or "").lower() == "socket":
            out.append(f"NCCL rank {r['rank']}: network peers over sockets (NET/Socket), not RDMA")
        elif rdma and "NET/IB" in kinds and not r["gdr"]:
            out.append(f"NCCL rank {r['rank']}: NET/IB without GPUDirect RDMA (no GDRDMA)")
    return out


def spec_has_rdma(spec: Any) -> bool:
    """Whether the rack is built for RDMA: RoCE on, or a NIC given to the VMs whole
    (passthrough or SR-IOV: the GPUDirect RDMA path)."""
    if spec.network.roce.enabled:
        return True
    return any(str(getattr(t.nic, "value", t.nic)) != "vmxnet3" for t in spec.vm_templates)
