"""An allreduce in a loop for the burn-in's duration, its busbw per interval.

Why: a link that flaps, a switch port that retrains, a NIC that falls back under heat show
as intervals far below the loop's own median long before a job fails; a few seconds of
bench cannot see them. The burn-in runs this on each node (its GPUs, under torchrun) and
across every node (one rank a node) while the GEMM and HBM load runs beside it.

busbw is nccl-tests' (doc/PERFORMANCE.md): algbw x 2(n-1)/n. The first collective runs with
NCCL's own log on when `--nccl-debug` is given (NCCL_DEBUG=INFO, subsystems INIT and NET),
so the controller can read the transport each rank chose (validation.bench.burnin.nccl).

With `--control`, rank 0 reads lines on its stdin (validation.bench.stdin_control): PAUSE
makes every rank stop at the next interval's start and rank 0 print PAUSED; RESUME (or the
end of its input) starts the loop again. The burn-in's pair rounds measure links while
the loop is paused: beside a loop that fills every ring link, a link reads only the share
the loop leaves it. The intervals' wall-clock starts (`starts`) and the pauses (`paused`,
[start, end] pairs) are in the record.

Self-contained (standard library and torch), sent as `python -c SOURCE` or written to a
file for torchrun; rank and world from `--rank/--world` or torchrun's environment.
It prints one JSON object on its last line (rank 0):
    {"rank": 0, "ranks": 4, "backend": "gloo", "size_bytes": 1048576, "interval_s": 10,
     "busbw_gb_s": [0.011, 0.012, ...], "correct": true}
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import subprocess
import sys
import threading
import time
from typing import Any


def interface_to(peer: str) -> str | None:
    """The local interface whose address the kernel picks to reach `peer`."""
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


class Pause:
    """Rank 0's stdin, read in a thread: whether the controller asked the loop to yield."""

    def __init__(self, listen: bool) -> None:
        self.asked = threading.Event()
        if listen:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            word = line.strip()
            if word == "PAUSE":
                self.asked.set()
            elif word == "RESUME":
                self.asked.clear()
        self.asked.clear()  # no controller any more: the loop runs to its deadline


def soak(args: argparse.Namespace) -> dict[str, Any]:
    rank = args.rank if args.rank is not None else int(os.environ.get("RANK", "0"))
    world = args.world if args.world is not None else int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if args.master and world > 1:
        ifname = args.ifname or interface_to(args.master if rank else args.peer or args.master)
        if ifname:
            os.environ.setdefault("GLOO_SOCKET_IFNAME", ifname)
            os.environ.setdefault("NCCL_SOCKET_IFNAME", ifname)
    if args.nccl_debug:
        os.environ["NCCL_DEBUG"] = "INFO"
        os.environ.setdefault("NCCL_DEBUG_SUBSYS", "INIT,NET")
    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available() and args.device != "cpu"
    backend = "nccl" if cuda else "gloo"
    dev = torch.device("cuda", local) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)
    init = f"tcp://{args.master}:{args.port}" if args.master else "env://"
    dist.init_process_group(
        backend,
        init_method=init,
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=args.timeout),
    )
    factor = 2.0 * (world - 1) / world
    # GPU ranks move --size-bytes; CPU ranks (no CUDA here, whatever the spec's template
    # says) --cpu-size-bytes: 256 MiB over the lab's 100 Mbit/s links took 21 s a collective,
    # and the loop, which pauses only between intervals, could not yield to a pair round.
    size = args.size_bytes if cuda or args.cpu_size_bytes is None else args.cpu_size_bytes
    t = torch.ones(size // 4, dtype=torch.float32, device=dev)
    sync = (lambda: torch.cuda.synchronize(dev)) if cuda else (lambda: None)
    try:
        dist.all_reduce(t)  # connections made (and NCCL's log written) here
        correct = bool(torch.all(t[:8].cpu() == float(world)))
        dist.barrier()
        # every rank runs the same count each interval: rank 0's calibration, shared
        t0 = time.perf_counter()
        for _ in range(3):
            dist.all_reduce(t)
        sync()
        per = (time.perf_counter() - t0) / 3
        count = torch.tensor([max(1.0, args.interval / per) if rank == 0 else 0.0], device=dev)
        dist.all_reduce(count, op=dist.ReduceOp.MAX)
        n = int(count.item())
        deadline = time.monotonic() + args.duration
        intervals: list[float] = []
        starts: list[float] = []
        paused: list[list[float]] = []
        pause = Pause(args.control and rank == 0)
        while True:
            # [over, pause]: MAX over ranks, so all stop at the same interval, and all
            # yield when rank 0 was asked to
            ask = 1.0 if pause.asked.is_set() else 0.0
            state = torch.tensor([float(time.monotonic() >= deadline), ask], device=dev)
            dist.all_reduce(state, op=dist.ReduceOp.MAX)
            over, yielding = (float(v) for v in state.tolist())
            if over:
                break
            if yielding:
                if not paused or len(paused[-1]) == 2:
                    paused.append([round(time.time(), 3)])
                    if rank == 0:
                        print("PAUSED", flush=True)
                time.sleep(0.2)
                continue
            if paused and len(paused[-1]) == 1:
                paused[-1].append(round(time.time(), 3))
            starts.append(round(time.time(), 3))
            t0 = time.perf_counter()
            for _ in range(n):
                dist.all_reduce(t)
            sync()
            seconds = time.perf_counter() - t0
            intervals.append(round(size * n / seconds / 1e9 * factor, 6))
        if paused and len(paused[-1]) == 1:
            paused[-1].append(round(time.time(), 3))
    finally:
        dist.destroy_process_group()
    return {
        "rank": rank,
        "ranks": world,
        "backend": backend,
        "size_bytes": size,
        "interval_s": args.interval,
        "busbw_gb_s": intervals,
        "starts": starts,  # each interval's wall-clock start (the controller's pair rounds)
        "paused": paused,  # [from, to] wall-clock, while the controller measured links
        "correct": correct,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--rank", type=int, default=None)
    p.add_argument("--world", type=int, default=None)
    p.add_argument("--master", default=None, help="rank 0's address (TCP store); else env://")
    p.add_argument("--peer", default=None, help="rank 0: an address of another rank's node")
    p.add_argument("--port", type=int, default=29441)
    p.add_argument("--size-bytes", type=int, default=1 << 20)
    p.add_argument("--cpu-size-bytes", type=int, default=None, help="when no GPU: this size")
    p.add_argument("--duration", type=float, default=60.0)
    p.add_argument("--interval", type=float, default=10.0)
    p.add_argument("--device", choices=("auto", "cpu"), default="auto")
    p.add_argument("--ifname", default=None)
    p.add_argument("--timeout", type=int, default=120)
    p.add_argument("--nccl-debug", action="store_true")
    p.add_argument("--control", action="store_true", help="rank 0 obeys PAUSE/RESUME on stdin")
    args = p.parse_args(argv)
    try:
        out = soak(args)
    except Exception as exc:  # noqa: BLE001 - the reason goes to the record, one line
        print(f"error: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}", flush=True)
        return 1
    if out["rank"] == 0:
        print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    # No interpreter teardown once the record is printed and the group destroyed: a Gloo
    # rank's C++ static destructors can abort it then ("terminate called without an active
    # exception"), as validation.bench.node.worker.leave says; this file is sent alone.
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
