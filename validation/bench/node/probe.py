"""The per-node stage of localisation: each GPU alone, then the node's own allreduce.

Why: a rack's average hides its slowest part. DCGM diagnostics test each GPU on its own;
this probe does the short, fixed version of that on every node at the same moment, so
each figure can be judged against the rack's own median (validation.bench.localisation.outliers):
- each GPU alone, one after another: a GEMM rate (bf16 on GPUs), host-to-device and
  device-to-host copy bandwidth from pinned memory (the PCIe path), and the GPU's PCIe
  link as `nvidia-smi --query-gpu` reports it (generation and width, current and max);
- then the node's allreduce across its GPUs (torch.distributed, NCCL; Gloo on CPU), busbw
  as nccl-tests defines it (algbw x 2(n-1)/n).
On a node without a usable GPU (the lab) the same stages run on the CPU: one "unit" named
`cpu`, a single-threaded float32 GEMM and a memory copy, so a CPU quota shows.

The script is self-contained (standard library; torch, else numpy): `localise` sends its
source over SSH as the command (`python3 -c SOURCE --barrier ...`), so a node needs no
rackcert install. All nodes start their timed loops together so that every node
measures while every other node is busy too, as in a training job: with `--barrier`
each prints READY once its imports are done and waits for the controller's line, sent
when all are READY (`--start-at EPOCH` instead waits for a synchronised clock).

It prints one JSON object on its last line:
    {"node": "lab-node1", "device": "cpu", "engine": "numpy", "units": [
       {"unit": "cpu", "pci": null, "gemm_gflops": 9.1, "memcpy_gb_s": 4.2}],
     "smi": [{"index": 0, "pci": "0000:13:00.0", "pcie_gen": 3, "pcie_width": 8,
              "pcie_gen_max": 5, "pcie_width_max": 16, "name": "NVIDIA H200"}],
     "allreduce": {"ranks": 2, "size_bytes": ..., "busbw_gb_s": ...} | null,
     "notes": ["..."]}
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from typing import Any

SMI_FIELDS = (
    "index,pci.bus_id,name,pcie.link.gen.current,pcie.link.gen.max,"
    "pcie.link.width.current,pcie.link.width.max"
)


def pci_address(bus_id: str) -> str:
    """nvidia-smi's `00000000:17:00.0` -> the spec's `0000:17:00.0` (lower case)."""
    dom, _, rest = bus_id.strip().partition(":")
    return f"{int(dom, 16):04x}:{rest.lower()}" if rest else bus_id.strip().lower()


def parse_smi(text: str) -> list[dict[str, Any]]:
    """`nvidia-smi --query-gpu=SMI_FIELDS --format=csv,noheader,nounits` -> one dict per GPU."""

    def num(v: str) -> int | None:
        return int(v) if v.strip().isdigit() else None

    out = []
    for row in csv.reader(io.StringIO(text), skipinitialspace=True):
        if len(row) != 7 or not row[0].strip().isdigit():
            continue
        out.append(
            {
                "index": int(row[0]),
                "pci": pci_address(row[1]),
                "name": row[2].strip(),
                "pcie_gen": num(row[3]),
                "pcie_gen_max": num(row[4]),
                "pcie_width": num(row[5]),
                "pcie_width_max": num(row[6]),
            }
        )
    return out


def read_smi(notes: list[str]) -> list[dict[str, Any]]:
    if not shutil.which("nvidia-smi"):
        return []
    argv = ["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        notes.append(f"nvidia-smi: {exc}")
        return []
    if done.returncode != 0:
        notes.append(f"nvidia-smi exit {done.returncode}: {done.stdout.strip()[:200]}")
        return []
    return parse_smi(done.stdout)


def start_together(args: argparse.Namespace) -> None:
    """Wait for the others: `--barrier` prints READY and waits for a line on stdin (the
    controller sends it when every node is READY); `--start-at` sleeps until that instant."""
    if args.barrier:
        print("READY", flush=True)
        sys.stdin.readline()
        return
    delay = args.start_at - time.time()
    if delay > 0:
        time.sleep(delay)


def rate(fn: Any, duration: float, sync: Any = None, windows: int = 5) -> float:
    """Calls per second of fn over `duration`, the median of `windows` equal windows (after
    sync()): a moment of interference on a shared node does not move it, a CPU quota or a
    slow device (every window slow) does."""
    return statistics.median(calls / wall for calls, wall, _ in _windows(fn, duration, sync))


def _windows(
    fn: Any, duration: float, sync: Any = None, windows: int = 5, clock: Any = None
) -> list[tuple[int, float, float]]:
    """(calls, wall seconds, `clock` seconds) of each window; `clock` defaults to the wall."""
    out = []
    for _ in range(windows):
        calls, t0 = 0, time.perf_counter()
        own0 = clock() if clock else t0
        while True:
            fn()
            calls += 1
            if sync:
                sync()
            elapsed = time.perf_counter() - t0
            if elapsed >= duration / windows:
                break
        out.append((calls, elapsed, (clock() - own0) if clock else elapsed))
    return out


def _cpu_stat_files() -> list[str]:
    """cpu.stat of this process's CPU cgroup and of each group above it (a quota on any of
    them throttles us): cgroup v1's cpu controller, else the v2 hierarchy."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = [x.rstrip("\n").split(":", 2) for x in f]
    except OSError:
        return []
    v1 = [path for _, ctl, path in lines if "cpu" in ctl.split(",")]
    v2 = [path for _, ctl, path in lines if ctl == ""]
    root = next(
        (r for r in ("/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct") if os.path.isdir(r)), ""
    )
    if v1 and root:
        path = v1[0]
    elif v2:
        root, path = "/sys/fs/cgroup", v2[0]
    else:
        return []
    parts = [x for x in path.split("/") if x]
    files = (os.path.join(root, *parts[:depth], "cpu.stat") for depth in range(len(parts), -1, -1))
    return [f for f in files if os.path.isfile(f)]


class OwnTime:
    """A CPU unit's own time: the wall clock less the time its thread waited on a run queue
    behind other processes, beyond what its own cgroup's quota held it back.

    Why: a CPU figure is judged against the rack's median, and where nodes share cores (the
    lab's nodes share one machine's) the kernel can queue two of them behind other work for
    a whole probe: their wall-clock rate is then low for a reason that is not theirs. The
    thread's wait on a run queue is `run_delay` in /proc/thread-self/schedstat (the kernel's
    Documentation/scheduler/sched-stats.rst); it includes the time a CFS quota throttled the
    thread's group, which that group's cpu.stat counts as throttled time (sched-bwc.rst).
    Wall less (wait - throttled) is the time the node's own configuration gave it: a quota
    or a slow core reads slow, a neighbour's load does not. On a dedicated node the wait is
    ~0 and this is the wall clock; without schedstat it is the wall clock (`own_clock`
    false in the figures).
    """

    def __init__(self) -> None:
        self.stat_files = _cpu_stat_files()
        self.available = self._sched() is not None

    @staticmethod
    def _sched() -> tuple[int, int] | None:
        try:
            with open("/proc/thread-self/schedstat") as f:
                cpu_ns, wait_ns, _slices = (int(x) for x in f.read().split())
        except (OSError, ValueError):
            return None
        return cpu_ns, wait_ns

    def throttled_ns(self) -> int:
        """The most any of our groups was throttled: the group that set the quota counts it."""
        most = 0
        for path in self.stat_files:
            try:
                with open(path) as f:
                    for line in f:
                        key, _, value = line.partition(" ")
                        if key == "throttled_time":  # v1, ns
                            most = max(most, int(value))
                        elif key == "throttled_usec":  # v2
                            most = max(most, int(value) * 1000)
            except (OSError, ValueError):
                continue
        return most

    def snapshot(self) -> tuple[float, float, float, float]:
        """(wall, CPU, run-queue wait, throttled) seconds, all cumulative."""
        wall = time.perf_counter()
        cpu_ns, wait_ns = self._sched() or (0, 0)
        return wall, cpu_ns / 1e9, wait_ns / 1e9, self.throttled_ns() / 1e9

    def seconds(self) -> float:
        """A clock that stands still while the thread waits behind other processes."""
        wall, _cpu, wait, throttled = self.snapshot()
        return wall - max(0.0, wait - throttled) if self.available else wall


def _on_cpu() -> int | None:
    """The CPU this thread runs on now (proc(5): /proc/thread-self/stat, field 39)."""
    try:
        with open("/proc/thread-self/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return int(rest[36])
    except (OSError, IndexError, ValueError):
        return None


def _machine() -> str | None:
    """The running kernel's boot_id (proc(5)): nodes that share it share one machine's CPUs
    (the lab), and validation.bench.localisation.colocated reads a CPU's slowness as the CPU's."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip() or None
    except OSError:
        return None


def own_rate(fn: Any, duration: float, windows: int = 5) -> float:
    """Calls per second of the thread's own time (OwnTime), the median of `windows`: a CPU
    unit's copy rate, judged like its GEMM. Why: per wall second, a 64 MiB copy in 0.1 s
    windows on a shared machine read what the run queue left it (one lab node: 0.64 and 1.06
    GB/s in one roll); a quota still shows (throttled time is the node's own), and on a
    dedicated node the own time is the wall clock."""
    own = OwnTime()
    runs = _windows(fn, duration, windows=windows, clock=own.seconds)
    return statistics.median(calls / max(o, 1e-9) for calls, _, o in runs)


def cpu_gemm(fn: Any, duration: float, flops_per_call: float, windows: int = 5) -> dict:
    """A CPU unit's GEMM entries in the record: `gemm_gflops` per second of the node's own
    time (`OwnTime`; the figure judged), `gemm_gflops_wall` per wall second, and the shares
    of the wall time the GEMM ran, waited behind other processes, and was throttled by its
    own cgroup (None where the kernel keeps no schedstat)."""
    own = OwnTime()
    seen: Counter[int] = Counter()  # the CPU it ran on, looked at every 16th call
    made = 0

    def looked_at() -> Any:
        nonlocal made
        made += 1
        if made % 16 == 0 and (on := _on_cpu()) is not None:
            seen[on] += 1
        return fn()

    before = own.snapshot()
    runs = _windows(looked_at, duration, windows=windows, clock=own.seconds)
    after = own.snapshot()
    cpu_id, looks = seen.most_common(1)[0] if seen else (None, 0)
    wall, cpu, wait, throttled = (b - a for a, b in zip(before, after, strict=True))
    known = own.available
    per_own_s = statistics.median(calls / max(o, 1e-9) for calls, _, o in runs)
    per_wall_s = statistics.median(calls / w for calls, w, _ in runs)
    return {
        "gemm_gflops": flops_per_call * per_own_s / 1e9,
        "gemm_gflops_wall": flops_per_call * per_wall_s / 1e9,
        "cpu_share": cpu / wall if known else None,  # of one core: CPU s per wall s
        "cpu_waited": max(0.0, wait - throttled) / wall if known else None,
        "cpu_throttled": throttled / wall if known else None,
        "own_clock": known,
        # where it ran: the CPU of at least 80 % of the looks (else None: it moved) and the
        # machine; validation.bench.localisation.colocated
        "cpu_id": cpu_id if looks >= 0.8 * sum(seen.values()) else None,
        "machine": _machine(),
    }


# -- torch: GPUs (and the same code on the CPU) ----------------------------------------------
def torch_unit(torch: Any, device: str, duration: float, gemm_n: int, copy_mb: int) -> dict:
    """One device alone: GEMM rate, then H2D and D2H copies (CPU: a memory copy)."""
    dev = torch.device(device)
    cuda = dev.type == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    sync = (lambda: torch.cuda.synchronize(dev)) if cuda else None
    a = torch.randn(gemm_n, gemm_n, device=dev, dtype=dtype)
    b = torch.randn(gemm_n, gemm_n, device=dev, dtype=dtype)
    torch.matmul(a, b)
    out: dict[str, Any] = {"gemm_n": gemm_n}
    if cuda:
        per_s = rate(lambda: torch.matmul(a, b), duration, sync)
        out["gemm_gflops"] = 2 * gemm_n**3 * per_s / 1e9
    else:
        out.update(cpu_gemm(lambda: torch.matmul(a, b), duration, 2 * gemm_n**3))
    nbytes = copy_mb << 20
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=cuda)
    if cuda:
        on_dev = torch.empty(nbytes, dtype=torch.uint8, device=dev)
        per_s = rate(lambda: on_dev.copy_(host, non_blocking=True), duration / 2, sync)
        out["h2d_gb_s"] = nbytes * per_s / 1e9
        per_s = rate(lambda: host.copy_(on_dev, non_blocking=True), duration / 2, sync)
        out["d2h_gb_s"] = nbytes * per_s / 1e9
    else:
        other = torch.empty_like(host)
        out["memcpy_gb_s"] = nbytes * own_rate(lambda: other.copy_(host), duration / 2) / 1e9
    return out


def _allreduce_rank(rank: int, world: int, port: int, size: int, iters: int, q: Any) -> None:
    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl" if cuda else "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
    )
    dev = torch.device("cuda", rank) if cuda else torch.device("cpu")
    t = torch.ones(size // 4, dtype=torch.float32, device=dev)
    dist.all_reduce(t)  # warm-up (NCCL communicator set-up)
    if cuda:
        torch.cuda.synchronize(dev)
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t)
    if cuda:
        torch.cuda.synchronize(dev)
    secs = (time.perf_counter() - t0) / iters
    ok = bool(torch.allclose(t[:8].cpu(), torch.full((8,), float(world) ** (iters + 1))))
    if rank == 0:
        algbw = size / secs / 1e9
        q.put({"algbw_gb_s": algbw, "busbw_gb_s": algbw * 2 * (world - 1) / world, "correct": ok})
    dist.destroy_process_group()


def node_allreduce(ranks: int, size: int, iters: int) -> dict[str, Any]:
    """The node's allreduce across its GPUs (CPU: Gloo ranks), one process per rank."""
    import torch
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # CUDA cannot be forked into; CPU ranks are forked (no second torch import per rank).
    method = "spawn" if torch.cuda.is_available() else "fork"
    q = mp.get_context(method).Queue()
    mp.start_processes(
        _allreduce_rank,
        args=(ranks, port, size, iters, q),
        nprocs=ranks,
        join=True,
        start_method=method,
    )
    return {"ranks": ranks, "size_bytes": size, "iterations": iters, **q.get(timeout=60)}


# -- numpy: the CPU of a node without torch or GPUs (the lab) ---------------------------------
def numpy_unit(np: Any, duration: float, gemm_n: int, copy_mb: int) -> dict[str, Any]:
    a = np.random.rand(gemm_n, gemm_n).astype(np.float32)
    b = np.random.rand(gemm_n, gemm_n).astype(np.float32)
    gemm = cpu_gemm(lambda: a @ b, duration, 2 * gemm_n**3)
    src = np.ones(copy_mb << 20, dtype=np.uint8)
    dst = np.empty_like(src)
    return {
        **gemm,
        "gemm_n": gemm_n,
        "memcpy_gb_s": src.nbytes * own_rate(lambda: np.copyto(dst, src), duration / 2) / 1e9,
    }


def probe(args: argparse.Namespace) -> dict[str, Any]:
    notes: list[str] = []
    smi = read_smi(notes)
    out: dict[str, Any] = {"node": socket.gethostname(), "smi": smi, "notes": notes}
    torch: Any = None
    wants_torch = smi or args.engine == "torch" or args.device == "cuda"
    if args.engine in ("auto", "torch") and wants_torch:
        try:
            import torch
        except ImportError:
            notes.append("torch does not import: CPU figures with numpy")
    cuda = torch is not None and torch.cuda.is_available() and args.device != "cpu"
    if smi and args.device == "cpu":
        notes.append("--device cpu: the GPUs nvidia-smi lists are not measured")
    elif smi and not cuda:
        notes.append("nvidia-smi lists GPUs but torch sees no CUDA device: CPU figures only")
    if args.device == "cuda" and not cuda:
        raise SystemExit("--device cuda: no CUDA device usable by torch on this node")
    units: list[dict[str, Any]] = []
    np: Any = None
    if not cuda and not (torch is not None and args.engine == "torch"):
        import numpy as np
    start_together(args)
    if cuda:
        assert torch is not None
        by_index = {g["index"]: g for g in smi}
        for i in range(torch.cuda.device_count()):
            pci = (by_index.get(i) or {}).get("pci")
            fig = torch_unit(torch, f"cuda:{i}", args.duration, args.gemm_n or 8192, args.copy_mb)
            units.append({"unit": f"GPU{i}", "pci": pci, **fig})
        out.update(device="cuda", engine="torch")
    elif torch is not None and args.engine == "torch":
        torch.set_num_threads(1)
        fig = torch_unit(torch, "cpu", args.duration, args.gemm_n or 256, args.copy_mb)
        units.append({"unit": "cpu", "pci": None, **fig})
        out.update(device="cpu", engine="torch")
    else:
        units.append(
            {
                "unit": "cpu",
                "pci": None,
                **numpy_unit(np, args.duration, args.gemm_n or 256, args.copy_mb),
            }
        )
        out.update(device="cpu", engine="numpy")
    out["units"] = units
    ranks = len(units) if cuda else args.cpu_ranks
    out["allreduce"] = None
    if args.allreduce and ranks >= 2:
        out["allreduce"] = node_allreduce(ranks, args.allreduce_mb << 20, args.allreduce_iters)
    elif args.allreduce:
        notes.append("one GPU: no allreduce inside the node")
    return out


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=1.0, help="seconds per timed loop")
    p.add_argument("--start-at", type=float, default=0.0, help="epoch second to start at")
    p.add_argument("--barrier", action="store_true", help="READY, then wait for a stdin line")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--engine", choices=("auto", "torch", "numpy"), default="auto")
    p.add_argument("--gemm-n", type=int, default=0, help="matrix side (0: 8192 GPU, 256 CPU)")
    p.add_argument("--copy-mb", type=int, default=64)
    p.add_argument("--allreduce", action="store_true", help="the node's allreduce too")
    p.add_argument("--allreduce-mb", type=int, default=64)
    p.add_argument("--allreduce-iters", type=int, default=10)
    p.add_argument("--cpu-ranks", type=int, default=2, help="Gloo ranks without GPUs")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    print(json.dumps(probe(parse_args(sys.argv[1:] if argv is None else argv))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
