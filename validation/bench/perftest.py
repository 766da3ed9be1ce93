"""RDMA bandwidth between node pairs with perftest's `ib_write_bw` (Debian's perftest).

Why: NCCL across nodes is only as fast as the RDMA path under it; ib_write_bw measures
that path alone, between two nodes, as NVIDIA's and every NIC vendor's bring-up guides
do. It runs where the nodes have RDMA devices (/sys/class/infiniband) and the tool; the
bench records a skip with its reason otherwise. With `--use_cuda` (when the build has
it, `ib_write_bw --help` lists it) the buffers live on GPU 0: GPUDirect RDMA.

The report is perftest's table (perftest README, "Running the tests"): one row per
message size, `#bytes #iterations BW peak BW average MsgRate`, in Gb/s with
--report_gbits.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

BINARY = "ib_write_bw"
_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")
_NO_DEVICE = ("Did not detect devices", "Unable to find the Infiniband/RoCE device",
              "No IB devices found")  # fmt: skip
PORT = 18515  # perftest's default port


class PerftestParseError(ValueError):
    """The output holds no bandwidth table; the message says why (e.g. no RDMA device)."""


def parse(text: str) -> dict[str, Any]:
    """ib_write_bw output -> {points: [{size_bytes, iterations, peak_gbps, avg_gbps,
    msg_rate_mpps}], device, link_type, gbits}."""
    if any(w in text for w in _NO_DEVICE):
        raise PerftestParseError("no RDMA device (ib_write_bw: Did not detect devices)")
    gbits = "[Gb/sec]" in text
    points = []
    header: dict[str, str] = {}
    for line in text.splitlines():
        if m := _ROW.match(line):
            points.append(
                {
                    "size_bytes": int(m.group(1)),
                    "iterations": int(m.group(2)),
                    "peak_gbps": float(m.group(3)) if gbits else float(m.group(3)) * 8e-3,
                    "avg_gbps": float(m.group(4)) if gbits else float(m.group(4)) * 8e-3,
                    "msg_rate_mpps": float(m.group(5)),
                }
            )
        for key in ("Device", "Link type", "Transport type", "Mtu"):
            found = re.search(rf"\b{key}\s*:\s*(\S+)", line)
            if found and key not in header:
                header[key] = found.group(1)
    if not points:
        raise PerftestParseError("no ib_write_bw bandwidth rows in the output")
    return {
        "points": points,
        "device": header.get("Device"),
        "link_type": header.get("Link type"),
        "mtu": header.get("Mtu"),
        "gbits": gbits,
        "best_avg_gbps": max(p["avg_gbps"] for p in points),
    }


def pairs(names: list[str]) -> list[tuple[str, str]]:
    """Node pairs to measure: each node against the next (a ring), so every NIC is a
    client once and a server once; one pair for two nodes, none for one."""
    if len(names) < 2:
        return []
    if len(names) == 2:
        return [(names[0], names[1])]
    return [(names[i], names[(i + 1) % len(names)]) for i in range(len(names))]


def server_command(device: str | None, use_cuda: bool, port: int = PORT) -> str:
    """The remote shell line of the listening side (one connection, then it exits)."""
    argv = [BINARY, "--report_gbits", "-F", "-a", "-p", str(port)]
    if device:
        argv += ["-d", device]
    if use_cuda:
        argv.append("--use_cuda=0")
    return shlex.join(argv)


def client_command(server: str, device: str | None, use_cuda: bool, port: int = PORT) -> str:
    """The connecting side: waits for the server to listen (it retries for ~10 s)."""
    line = server_command(device, use_cuda, port) + " " + shlex.quote(server)
    return f"for i in 1 2 3 4 5 6 7 8 9 10; do sleep 1; {line} && exit 0; done; exit 1"


# Asks a node whether it can run the test: RDMA devices, the tool, its CUDA support.
PROBE = (
    "ls /sys/class/infiniband 2>/dev/null | tr '\\n' ' '; echo;"
    f" command -v {BINARY} >/dev/null 2>&1 && echo tool=yes || echo tool=no;"
    f" {BINARY} --help 2>&1 | grep -q use_cuda && echo cuda=yes || echo cuda=no"
)


def parse_probe(text: str) -> dict[str, Any]:
    """PROBE's answer -> {devices: [...], tool: bool, cuda: bool}."""
    lines = text.strip().splitlines()
    devices = lines[0].split() if lines and "=" not in lines[0] else []
    return {"devices": devices, "tool": "tool=yes" in text, "cuda": "cuda=yes" in text}


def skip_reason(node: str, probe: dict[str, Any]) -> str | None:
    """Why the RDMA test cannot run on `node` (None: it can)."""
    if not probe["devices"]:
        return f"{node} has no RDMA device (/sys/class/infiniband is empty)"
    if not probe["tool"]:
        return f"{node} has RDMA devices but no {BINARY} (install perftest)"
    return None
