"""A two-node allreduce per pair: the link as a training job uses it (issue 34, Required 2).

Why: iperf3 or ib_write_bw say what the cable carries; a training job's traffic goes
through the collective library (NCCL on GPUs, Gloo on CPUs), whose own path (its
interface choice, its socket or RDMA transport, the GPU's PCIe path to the NIC) can be
slow on a link whose raw bandwidth is fine. So each round's disjoint pairs also run a
short two-rank torch.distributed allreduce at the same time, and its busbw (nccl-tests'
definition: algbw x 2(n-1)/n, which is algbw for two ranks) is judged per link with the
bandwidth's median rule (validation.bench.localisation.findings, rule `link_allreduce`).

The script is self-contained (standard library and torch), sent as `python -c SOURCE`
over SSH or as a Slurm step's command like the per-node probe, so a node needs no
rackcert install. Rank 0 is on the pair's first node and hosts the TCP store; each rank
picks the interface whose address routes to the peer (GLOO_SOCKET_IFNAME /
NCCL_SOCKET_IFNAME, as the libraries document), so a node's hostname need not resolve.

It prints one JSON object on its last line:
    {"rank": 0, "backend": "gloo", "size_bytes": 1048576, "iters": 5,
     "algbw_gb_s": 0.011, "busbw_gb_s": 0.011, "seconds": 0.47, "correct": true}
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PORT = 29431  # the pair's TCP store on its first node (the bench's c10d uses 29400)
SIZE_BYTES = 1 << 20
ITERS = 5


def interface_to(peer: str) -> str | None:
    """The local interface whose address the kernel picks to reach `peer` (None: unknown)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((peer, 9))  # UDP: no packet is sent, the route is looked up
            local = s.getsockname()[0]
        out = subprocess.run(
            ["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        cells = line.split()
        if len(cells) > 3 and cells[3].split("/")[0] == local:
            return cells[1].split("@")[0]
    return None


def run(args: argparse.Namespace) -> dict[str, Any]:
    peer = args.master if args.rank == 1 else args.peer
    ifname = args.ifname or interface_to(peer)
    if ifname:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", ifname)
        os.environ.setdefault("NCCL_SOCKET_IFNAME", ifname)
    import datetime

    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available() and args.device != "cpu"
    backend = "nccl" if cuda else "gloo"
    dev = torch.device("cuda", 0) if cuda else torch.device("cpu")
    dist.init_process_group(
        backend,
        init_method=f"tcp://{args.master}:{args.port}",
        rank=args.rank,
        world_size=2,
        timeout=datetime.timedelta(seconds=args.timeout),
    )
    try:
        t = torch.ones(args.size_bytes // 4, dtype=torch.float32, device=dev)
        dist.all_reduce(t)  # warm-up: connections made, buffers allocated
        dist.barrier()
        sync = (lambda: torch.cuda.synchronize(dev)) if cuda else (lambda: None)
        sync()
        t0 = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(t)
        sync()
        seconds = time.perf_counter() - t0
        correct = bool(torch.all(t[:8].cpu() == float(2 ** (args.iters + 1))))
    finally:
        dist.destroy_process_group()
    algbw = args.size_bytes * args.iters / seconds / 1e9
    return {
        "rank": args.rank,
        "backend": backend,
        "ifname": ifname,
        "size_bytes": args.size_bytes,
        "iters": args.iters,
        "seconds": seconds,
        "algbw_gb_s": algbw,
        "busbw_gb_s": algbw * 2 * (2 - 1) / 2,  # nccl-tests' busbw for n = 2 ranks
        "correct": correct,
    }


def command(
    python: str, rank: int, master: str, peer: str, *, device: str = "auto", timeout_s: int = 60
) -> str:
    """The shell line for one rank: this file's source as `python -c`."""
    source = Path(__file__).read_text()
    argv = [python, "-c", source, "--rank", str(rank), "--master", master, "--peer", peer,
            "--device", device, "--timeout", str(timeout_s)]  # fmt: skip
    return shlex.join(argv)


# What rank 0 prints, and of what type: a node's answer is untrusted, so only these fields
# reach the record, numbers as numbers and names cut short (the judge reads busbw_gb_s).
NUMBERS = ("rank", "size_bytes", "iters", "seconds", "algbw_gb_s", "busbw_gb_s")
NAMES = ("backend", "ifname")


def parse(text: str) -> dict[str, Any]:
    """Rank 0's output -> its JSON figures; ValueError with the reason when there are none."""
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            data = json.loads(line)
            if isinstance(data, dict):
                return _known(data)
    tail = text.strip().splitlines()[-1:] or ["no output"]
    raise ValueError(f"pair allreduce: {tail[0][:200]}")


def _known(data: dict[str, Any]) -> dict[str, Any]:
    """The fields rank 0 writes, checked: busbw_gb_s must be a number (ValueError), another
    figure that is not one is left out, as is any field rank 0 does not write."""
    out: dict[str, Any] = {"correct": data.get("correct") is True}
    for key in NUMBERS:
        value = data.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = value
        elif key == "busbw_gb_s":
            raise ValueError("pair allreduce: no busbw_gb_s figure in rank 0's answer")
    for key in NAMES:
        value = data.get(key)
        out[key] = str(value)[:64] if value is not None else None
    return out


def row_figures(rank0_text: str) -> dict[str, Any]:
    """The link row's `allreduce` block: the figures, or {"error": why}."""
    try:
        fig = parse(rank0_text)
    except ValueError as exc:
        return {"error": str(exc)}
    if not fig.get("correct"):
        return {**fig, "error": "wrong allreduce result"}
    return {**fig, "error": None}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--rank", type=int, choices=(0, 1), required=True)
    p.add_argument("--master", required=True, help="rank 0's address (the TCP store)")
    p.add_argument("--peer", required=True, help="rank 1's address")
    p.add_argument("--port", type=int, default=PORT)
    p.add_argument("--size-bytes", type=int, default=SIZE_BYTES)
    p.add_argument("--iters", type=int, default=ITERS)
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--ifname", default=None)
    p.add_argument("--timeout", type=int, default=60)
    args = p.parse_args(argv)
    try:
        out = run(args)
    except ImportError as exc:
        print(f"torch does not import on this node: {exc}", file=sys.stderr)
        print(f"error: torch does not import: {exc}")
        return 2
    except Exception as exc:  # noqa: BLE001 - the reason goes to the record, one line
        print(f"error: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
        return 1
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
