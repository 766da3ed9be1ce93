"""A node's burn-in: every GPU loaded for hours, watched once a second, counters before and after.

Why: rackcert's checks read counters once and its bench measures for seconds; an acceptance
run finds what only hours of load show (DCGM diag levels 3-4, gpu-burn, SuperBench's soak):
clocks that sag after twenty minutes at the power cap, HBM that corrupts data when hot, ECC
errors and remapped rows that accumulate, an XID under load, a PCIe link that replays, an
InfiniBand port whose symbol errors climb. This script is that load and that watch on one
node; the controller (validation.bench.burnin) starts it on every node, with the allreduce
loops beside it, and judges what it prints.

Per GPU, one thread, alternating until the end:
- a GEMM phase: bf16 n x n products back to back (what holds an H100 at its power cap,
  NOTES: 688-692 TFLOP/s sustained at 700 W), each batch's rate recorded;
- an HBM phase: at least 90 % of the free device memory written with a pattern (the
  element's own index plus a seed, and its bitwise complement on the next pass, so every
  bit is driven both ways), read back and compared; any mismatch is counted with its bytes
  and the first offset.
A sampler thread, every `--interval` seconds (1 s by default), records per GPU through NVML
(nvidia-ml-py): SM and memory clocks, power, temperature, the clocks-event reasons bitmask,
the volatile ECC counts and the GEMM rate of the interval; per InfiniBand/RoCE port (sysfs)
its error counters and state; every `--xid-every` seconds the kernel log's new NVIDIA XIDs.
Before the load and after it: every counter (ECC volatile and aggregate, retired pages,
remapped rows, PCIe replay, NVLink error counters, ports, XIDs).

On a node without a GPU (the lab) the load is a light single-thread CPU GEMM (a duty
cycle, recorded, never judged: lab nodes share their cores) and the watch reads the ports.

Self-contained (standard library, torch, nvidia-ml-py when present): the controller sends
its source as `python -c SOURCE ...`. Its last line is one JSON object (see `main`).

    python3 burnin.py --duration 600 --interval 1
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# nvml.h: nvmlClocksEventReasons (formerly ClocksThrottleReasons); the bits rackcert names.
REASONS = {
    "gpu_idle": 0x1,
    "applications_clocks": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake": 0x80,
    "display_clocks": 0x100,
}
# nvml.h constants (stable across NVML versions)
CLOCK_SM, CLOCK_MEM = 1, 2
TEMPERATURE_GPU = 0
ERR_CORRECTED, ERR_UNCORRECTED = 0, 1
VOLATILE, AGGREGATE = 0, 1
RETIRED_SBE, RETIRED_DBE = 0, 1
NVLINK_MAX = 18
NVLINK_COUNTERS = {"replay": 0, "recovery": 1, "crc_flit": 2, "crc_data": 3}
# The port counters of the InfiniBand sysfs ABI (Documentation/ABI/stable/sysfs-class-infiniband)
PORT_COUNTERS = (
    "symbol_error",
    "link_downed",
    "port_rcv_errors",
    "link_error_recovery",
    "port_xmit_discards",
)
# NVIDIA's driver logs `NVRM: Xid (PCI:0000:17:00): 79, pid=..., GPU has fallen off the bus.`
XID_LINE = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f:.]+)\): (\d+)(.*)")
DMESG_TIME = re.compile(r"^\[\s*(\d+\.\d+)\]")


# -- counters and readings through NVML -------------------------------------------------------
def load_nvml() -> Any:
    """nvidia-ml-py's module, initialised; None (with the reason on stderr) where absent."""
    try:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        return pynvml
    except Exception as e:  # no package, no driver, no GPU: the watch runs without NVML
        print(f"burnin: NVML unavailable: {e}", file=sys.stderr)
        return None


def _try(fn: Callable[[], Any]) -> Any:
    """One NVML question: None where the GPU does not support it (NotSupported, NoPermission)."""
    try:
        return fn()
    except Exception:
        return None


def _ask(nvml: Any, name: str, *args: Any) -> Any:
    """`nvml.<name>(*args)`: None where the GPU (or this NVML) does not answer it."""
    try:
        return getattr(nvml, name)(*args)
    except Exception:
        return None


def _text(v: Any) -> str | None:
    return v.decode() if isinstance(v, bytes) else (str(v) if v is not None else None)


def pci_address(bus_id: str) -> str:
    """NVML's `00000000:17:00.0` -> `0000:17:00.0` (lower case), the spec's form."""
    dom, _, rest = bus_id.strip().partition(":")
    try:
        return f"{int(dom, 16):04x}:{rest.lower()}" if rest else bus_id.strip().lower()
    except ValueError:
        return bus_id.strip().lower()


def identity(nvml: Any, h: Any, index: int) -> dict[str, Any]:
    """What names the part for a vendor RMA: serial, PCI address, UUID, model, power limit."""
    pci = _try(lambda: nvml.nvmlDeviceGetPciInfo(h))
    limit = _try(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(h))
    return {
        "index": index,
        "serial": _text(_try(lambda: nvml.nvmlDeviceGetSerial(h))),
        "uuid": _text(_try(lambda: nvml.nvmlDeviceGetUUID(h))),
        "name": _text(_try(lambda: nvml.nvmlDeviceGetName(h))),
        "pci": pci_address(_text(pci.busId) or "") if pci is not None else None,
        "power_limit_w": limit / 1000 if limit is not None else None,
    }


def gpu_counters(nvml: Any, h: Any) -> dict[str, Any]:
    """Every counter of one GPU that burn-in compares before and after."""
    ecc = {
        f"{scope}_{kind}": _ask(nvml, "nvmlDeviceGetTotalEccErrors", h, k, s)
        for scope, s in (("volatile", VOLATILE), ("aggregate", AGGREGATE))
        for kind, k in (("sbe", ERR_CORRECTED), ("dbe", ERR_UNCORRECTED))
    }
    retired: dict[str, Any] = {}
    for name, cause in (("sbe", RETIRED_SBE), ("dbe", RETIRED_DBE)):
        pages = _ask(nvml, "nvmlDeviceGetRetiredPages", h, cause)
        retired[name] = len(pages) if pages is not None else None
    pending = _try(lambda: nvml.nvmlDeviceGetRetiredPagesPendingStatus(h))
    retired["pending"] = bool(pending) if pending is not None else None
    rows = _try(lambda: nvml.nvmlDeviceGetRemappedRows(h))
    remap = (
        dict(zip(("correctable", "uncorrectable", "pending", "failure"), rows, strict=True))
        if rows is not None
        else None
    )
    if remap is not None:
        remap["pending"], remap["failure"] = bool(remap["pending"]), bool(remap["failure"])
    nvlink: dict[str, dict[str, Any]] = {}
    for link in range(NVLINK_MAX):
        if not _ask(nvml, "nvmlDeviceGetNvLinkState", h, link):
            continue
        nvlink[str(link)] = {
            name: _ask(nvml, "nvmlDeviceGetNvLinkErrorCounter", h, link, c)
            for name, c in NVLINK_COUNTERS.items()
        }
    return {
        "ecc": ecc,
        "retired_pages": retired,
        "remapped_rows": remap,
        "pcie_replay": _try(lambda: nvml.nvmlDeviceGetPcieReplayCounter(h)),
        "nvlink": nvlink,
    }


def reasons_of(nvml: Any, h: Any) -> int | None:
    """The clocks-event reasons bitmask (the newer name first, then the older)."""
    for name in (
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
    ):
        value = _ask(nvml, name, h)
        if value is not None:
            return int(value)
    return None


def gpu_sample(nvml: Any, h: Any) -> dict[str, Any]:
    """One interval's reading of one GPU: cheap NVML queries only (no counters walk)."""
    power = _try(lambda: nvml.nvmlDeviceGetPowerUsage(h))
    return {
        "sm_mhz": _try(lambda: nvml.nvmlDeviceGetClockInfo(h, CLOCK_SM)),
        "mem_mhz": _try(lambda: nvml.nvmlDeviceGetClockInfo(h, CLOCK_MEM)),
        "power_w": round(power / 1000, 1) if power is not None else None,
        "temp_c": _try(lambda: nvml.nvmlDeviceGetTemperature(h, TEMPERATURE_GPU)),
        "reasons": reasons_of(nvml, h),
        "ecc_sbe": _try(lambda: nvml.nvmlDeviceGetTotalEccErrors(h, ERR_CORRECTED, VOLATILE)),
        "ecc_dbe": _try(lambda: nvml.nvmlDeviceGetTotalEccErrors(h, ERR_UNCORRECTED, VOLATILE)),
    }


# -- ports (sysfs) and XIDs (kernel log) ------------------------------------------------------
def port_counters(sysfs_root: str) -> dict[str, dict[str, Any]]:
    """Every InfiniBand/RoCE port's error counters and state, by `device/port`."""
    base = Path(sysfs_root, "class", "infiniband")
    out: dict[str, dict[str, Any]] = {}
    for port in sorted(base.glob("*/ports/*")):
        row: dict[str, Any] = {}
        for name in PORT_COUNTERS:
            with contextlib.suppress(OSError, ValueError):
                row[name] = int(Path(port, "counters", name).read_text().split()[0])
        with contextlib.suppress(OSError, IndexError):
            row["state"] = Path(port, "state").read_text().split(":")[-1].strip()  # "4: ACTIVE"
        out[f"{port.parent.parent.name}/{port.name}"] = row
    return out


def kernel_log(path: str | None) -> str | None:
    """The kernel log's text: `path` when given (a saved log, a test's), else `dmesg`."""
    if path:
        try:
            return Path(path).read_text(errors="replace")
        except OSError:
            return None
    try:
        proc = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def xids(text: str) -> list[dict[str, Any]]:
    """Every XID line of a kernel log: the GPU's PCI address, the XID, the line."""
    out = []
    for line in text.splitlines():
        m = XID_LINE.search(line)
        if m:
            t = DMESG_TIME.match(line)
            out.append(
                {
                    "pci": pci_address(m.group(1)),
                    "xid": int(m.group(2)),
                    "line": line.strip()[:300],
                    "uptime_s": float(t.group(1)) if t else None,
                }
            )
    return out


# -- the load: GEMM and HBM phases, per GPU ---------------------------------------------------
@dataclass
class Rates:
    """Batches of GEMM work a load thread finished: (end time, busy seconds, flops)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    done: list[tuple[float, float, float]] = field(default_factory=list)
    taken: int = 0

    def add(self, end: float, busy: float, flops: float) -> None:
        with self.lock:
            self.done.append((end, busy, flops))

    def since_last(self) -> float | None:
        """TFLOP/s of the batches finished since the last call (None: none finished)."""
        with self.lock:
            new = self.done[self.taken :]
            self.taken = len(self.done)
        busy = sum(b for _, b, _ in new)
        return round(sum(f for _, _, f in new) / busy / 1e12, 3) if busy > 0 else None


@dataclass
class Plan:
    """How a load thread spends its time."""

    deadline: float
    gemm_s: float = 50.0
    hbm_s: float = 10.0
    n: int = 8192
    hbm_fraction: float = 0.9
    hbm_chunk_mib: int = 1024
    cpu_duty: float = 0.2
    stop: threading.Event = field(default_factory=threading.Event)

    def over(self) -> bool:
        return self.stop.is_set() or time.monotonic() >= self.deadline


def gemm_phase(torch: Any, dev: Any, plan: Plan, until: float, rates: Rates) -> None:
    """bf16 products back to back; each batch (~0.1 s) timed to its synchronisation."""
    n = plan.n
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    c = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
    k = 4
    while time.monotonic() < until and not plan.over():
        t0 = time.perf_counter()
        for _ in range(k):
            torch.matmul(a, b, out=c)
        torch.cuda.synchronize(dev)
        busy = time.perf_counter() - t0
        rates.add(time.monotonic(), busy, 2.0 * n**3 * k)
        k = max(1, min(256, int(k * 0.1 / busy))) if busy > 0 else k
    del a, b, c


def _sync(t: Any, torch: Any) -> None:
    if t.device.type == "cuda":
        torch.cuda.synchronize(t.device)


def _pattern(torch: Any, out: Any, first: int, seed: int, invert: bool) -> None:
    """`out[j] = first + j + seed`, complemented on odd passes (every bit driven both ways)."""
    torch.arange(first, first + out.numel(), out=out)
    out.add_(seed)
    if invert:
        out.bitwise_not_()


def write_pattern(torch: Any, bufs: list[Any], seed: int, invert: bool) -> None:
    """Every buffer written with the pass's pattern (buffer i's seed is seed + i x 7919)."""
    for i, buf in enumerate(bufs):
        _pattern(torch, buf, 0, seed + i * 7919, invert)
    if bufs:
        _sync(bufs[0], torch)


def verify_pattern(torch: Any, bufs: list[Any], scratch: Any, seed: int, invert: bool) -> list[int]:
    """Each buffer read back against the pattern regenerated in `scratch`, block by block;
    the mismatched elements per buffer (one synchronisation a buffer)."""
    bad = []
    m = scratch.numel()
    for i, buf in enumerate(bufs):
        total = torch.zeros((), dtype=torch.int64, device=buf.device)
        for off in range(0, buf.numel(), m):
            part = buf[off : off + m]
            want = scratch[: part.numel()]
            _pattern(torch, want, off, seed + i * 7919, invert)
            total += (part != want).sum()
        bad.append(int(total.item()))
    return bad


def first_mismatch(
    torch: Any, buf: Any, scratch: Any, seed: int, invert: bool
) -> tuple[int, int, int] | None:
    """(byte offset, value read, value written) of the first mismatched element of one
    buffer (`seed` already the buffer's own): only called on a mismatch."""
    m = scratch.numel()
    for off in range(0, buf.numel(), m):
        part = buf[off : off + m]
        want = scratch[: part.numel()]
        _pattern(torch, want, off, seed, invert)
        idx = torch.nonzero(part != want)
        if idx.numel():
            j = int(idx[0].item())
            return (off + j) * 4, int(part[j].item()), int(want[j].item())
    return None


def hbm_pass(
    torch: Any,
    bufs: list[Any],
    scratch: Any,
    n: int,
    gpu: int,
    *,
    free: int,
    chunk: int,
    between: Callable[[list[Any]], None] | None = None,
) -> dict[str, Any]:
    """Pass `n`: write, read back, compare; its record. `between` runs after the write and
    before the read-back (what a failing cell does; the tests plant one there)."""
    seed, invert = (n * 104729) & 0x3FFFFFFF, n % 2 == 1
    t0 = time.perf_counter()
    write_pattern(torch, bufs, seed, invert)
    if between is not None:
        between(bufs)
    bad = verify_pattern(torch, bufs, scratch, seed, invert)
    tested = sum(b.numel() * 4 for b in bufs)
    row: dict[str, Any] = {
        "gpu": gpu,
        "t": time.time(),
        "pattern": "~(index+seed)" if invert else "index+seed",
        "seed": seed,
        "bytes_tested": tested,
        "free_bytes": free,
        "fraction_of_free": round(tested / free, 4) if free else None,
        "mismatched_bytes": 4 * sum(bad),
        "first_offset": None,
        "wall_s": round(time.perf_counter() - t0, 3),
    }
    for i, n_bad in enumerate(bad):
        if n_bad:
            first = first_mismatch(torch, bufs[i], scratch, seed + i * 7919, invert)
            if first is not None:
                row["first_offset"] = i * chunk + first[0]
                row["first_read"], row["first_written"] = hex(first[1]), hex(first[2])
            break
    return row


def hbm_phase(torch: Any, dev: Any, plan: Plan, until: float, gpu: int, out: list[dict]) -> None:
    """At least `hbm_fraction` of the free memory in chunks, passes of alternating patterns
    until `until`; one record per pass."""
    torch.cuda.empty_cache()
    free, _total = torch.cuda.mem_get_info(dev)
    chunk = plan.hbm_chunk_mib << 20
    scratch = torch.empty(16 << 20, dtype=torch.int32, device=dev)  # 64 MiB
    bufs: list[Any] = []
    want = int(free * plan.hbm_fraction) - scratch.numel() * 4
    with contextlib.suppress(RuntimeError):  # torch.OutOfMemoryError is a RuntimeError
        while sum(b.numel() * 4 for b in bufs) + chunk <= want:
            bufs.append(torch.empty(chunk // 4, dtype=torch.int32, device=dev))
        rest = want - sum(b.numel() * 4 for b in bufs)
        if rest >= 4 << 20:
            bufs.append(torch.empty(rest // 4, dtype=torch.int32, device=dev))
    tested = sum(b.numel() * 4 for b in bufs) + scratch.numel() * 4
    passes = 0
    while (passes == 0 or time.monotonic() < until) and not plan.stop.is_set():
        n = sum(1 for r in out if r["gpu"] == gpu)  # the patterns alternate across phases too
        out.append(hbm_pass(torch, bufs, scratch, n, gpu, free=free, chunk=chunk))
        out[-1]["bytes_tested"] = tested
        out[-1]["fraction_of_free"] = round(tested / free, 4) if free else None
        passes += 1
    del bufs, scratch
    torch.cuda.empty_cache()


def gpu_load(
    torch: Any, gpu: int, plan: Plan, rates: Rates, hbm: list[dict], errors: list[str]
) -> None:
    """One GPU's load until the deadline: GEMM phase, HBM phase, again."""
    try:
        dev = torch.device("cuda", gpu)
        torch.cuda.set_device(dev)
        while not plan.over():
            gemm_phase(torch, dev, plan, min(plan.deadline, time.monotonic() + plan.gemm_s), rates)
            if plan.over() or plan.hbm_s <= 0:
                continue
            hbm_phase(torch, dev, plan, min(plan.deadline, time.monotonic() + plan.hbm_s), gpu, hbm)
    except Exception as e:  # a failed GPU is the finding, not a crashed node
        errors.append(f"GPU{gpu}: {type(e).__name__}: {e}"[:300])


def cpu_load(torch: Any, plan: Plan, rates: Rates, errors: list[str]) -> None:
    """A node without a GPU: a small single-thread GEMM at a duty cycle, so the lab's shared
    cores are loaded, not taken."""
    try:
        n = 256
        a, b = torch.randn(n, n), torch.randn(n, n)
        while not plan.over():
            t0 = time.perf_counter()
            for _ in range(8):
                torch.matmul(a, b)
            busy = time.perf_counter() - t0
            rates.add(time.monotonic(), busy, 2.0 * n**3 * 8)
            plan.stop.wait(busy * (1 - plan.cpu_duty) / plan.cpu_duty)
    except Exception as e:
        errors.append(f"cpu: {type(e).__name__}: {e}"[:300])


# -- the watch ---------------------------------------------------------------------------------
class Series:
    """Columns of samples: t (seconds from the start), per GPU and per port one list a field."""

    def __init__(self, gpus: list[int], fields: tuple[str, ...]) -> None:
        self.t: list[float] = []
        self.gpus = {str(g): {f: [] for f in fields} for g in gpus}  # type: ignore[var-annotated]
        self.ports: dict[str, dict[str, list[Any]]] = {}

    def add_ports(self, at: int, reading: dict[str, dict[str, Any]]) -> None:
        for name, row in reading.items():
            cols = self.ports.setdefault(name, {})
            for k, v in row.items():
                col = cols.setdefault(k, [None] * at)
                col.extend([None] * (at - len(col)))
                col.append(v)

    def to_dict(self) -> dict[str, Any]:
        return {"t": self.t, "gpus": self.gpus, "ports": self.ports}


GPU_FIELDS = (
    "sm_mhz",
    "mem_mhz",
    "power_w",
    "temp_c",
    "reasons",
    "ecc_sbe",
    "ecc_dbe",
    "gemm_tflops",
)


@dataclass
class Watch:
    """The sampler: what it reads from, how often, and where the load's rates come from."""

    nvml: Any
    handles: list[Any]
    rates: list[Rates]
    interval_s: float = 1.0
    sysfs_root: str = "/"
    kernel_log: str | None = None
    xid_every_s: float = 30.0
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], bool] = field(default_factory=lambda: threading.Event().wait)

    def counters(self) -> dict[str, Any]:
        """Every counter now: per GPU, the ports, the kernel log's XIDs."""
        text = kernel_log(self.kernel_log)
        return {
            "t": self.clock(),
            "gpus": {str(i): gpu_counters(self.nvml, h) for i, h in enumerate(self.handles)}
            if self.nvml is not None
            else {},
            "ports": port_counters(self.sysfs_root),
            "xids": xids(text) if text is not None else None,
        }

    def sample(self, series: Series, start: float) -> None:
        """One interval: every GPU's reading and GEMM rate, every port's counters."""
        at = len(series.t)
        series.t.append(round(self.clock() - start, 3))
        for i, col in series.gpus.items():
            row = gpu_sample(self.nvml, self.handles[int(i)]) if self.nvml is not None else {}
            row["gemm_tflops"] = self.rates[int(i)].since_last()
            for f in GPU_FIELDS:
                col[f].append(row.get(f))
        series.add_ports(at, port_counters(self.sysfs_root))

    def run(self, until: Callable[[], bool], start: float) -> tuple[Series, list[dict[str, Any]]]:
        """Sample every interval until `until()`; the series and each new XID with its time."""
        series = Series(list(range(len(self.rates))), GPU_FIELDS)
        seen = len(xids(kernel_log(self.kernel_log) or ""))
        found: list[dict[str, Any]] = []
        next_xid = start + self.xid_every_s
        tick = start
        while not until():
            tick += self.interval_s
            self.sleep(max(0.0, tick - self.clock()))
            self.sample(series, start)
            if self.clock() >= next_xid:
                next_xid += self.xid_every_s
                now = xids(kernel_log(self.kernel_log) or "")
                for x in now[seen:]:
                    found.append({**x, "t": round(self.clock() - start, 3)})
                seen = max(seen, len(now))
        now = xids(kernel_log(self.kernel_log) or "")
        found += [{**x, "t": round(self.clock() - start, 3)} for x in now[seen:]]
        return series, found


# -- the node's run ------------------------------------------------------------------------
def gpu_handles(nvml: Any, count: int) -> list[Any]:
    return [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)] if nvml is not None else []


def torch_gpus(torch: Any) -> int:
    try:
        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    except Exception:
        return 0


def burnin(args: argparse.Namespace) -> dict[str, Any]:
    """Load and watch until the deadline; the node's record (see `main`)."""
    import torch

    ngpu = 0 if args.device == "cpu" else torch_gpus(torch)
    nvml = load_nvml() if ngpu else None
    handles = gpu_handles(nvml, ngpu)
    units = list(range(ngpu)) if ngpu else [0]
    rates = [Rates() for _ in units]
    start = time.time()
    plan = Plan(
        deadline=time.monotonic() + args.duration,
        gemm_s=args.gemm_s,
        hbm_s=args.hbm_s,
        n=args.n,
        hbm_fraction=args.hbm_fraction,
    )
    watch = Watch(
        nvml, handles, rates, args.interval, args.sysfs_root, args.kernel_log, args.xid_every
    )
    if args.no_sampler:  # the sampler's cost: the same load, nothing watching
        watch.interval_s = args.duration + 1
    before = watch.counters()
    hbm: list[dict[str, Any]] = []
    errors: list[str] = []
    if ngpu:
        threads = [
            threading.Thread(
                target=gpu_load, args=(torch, g, plan, rates[g], hbm, errors), daemon=True
            )
            for g in units
        ]
    else:
        torch.set_num_threads(1)
        threads = [
            threading.Thread(target=cpu_load, args=(torch, plan, rates[0], errors), daemon=True)
        ]
    for t in threads:
        t.start()
    series, new_xids = watch.run(plan.over, start)
    plan.stop.set()
    for t in threads:
        t.join(timeout=120)
    after = watch.counters()
    return assemble(
        nvml,
        handles,
        rates,
        start=start,
        interval_s=args.interval,
        sampler=not args.no_sampler,
        gemm={"n": args.n, "dtype": "bfloat16" if ngpu else "float32"},
        series=series,
        counters={"before": before, "after": after},
        xids_new=new_xids,
        hbm=hbm,
        errors=errors,
        device="cuda" if ngpu else "cpu",
        versions={"torch": torch.__version__},
        ended=watch.clock(),
    )


def assemble(
    nvml: Any,
    handles: list[Any],
    rates: list[Rates],
    *,
    start: float,
    ended: float,
    interval_s: float,
    sampler: bool,
    gemm: dict[str, Any],
    series: Series,
    counters: dict[str, Any],
    xids_new: list[dict[str, Any]],
    hbm: list[dict[str, Any]],
    errors: list[str],
    device: str,
    versions: dict[str, str],
) -> dict[str, Any]:
    """The node's record (main's docstring shows it) from what the run gathered."""
    ngpu = len(rates) if device == "cuda" else 0
    gpus = (
        [identity(nvml, h, i) for i, h in enumerate(handles)]
        if nvml is not None
        else [{"index": g, "serial": None, "pci": None} for g in range(ngpu)]
    )
    return {
        "node": socket.gethostname(),
        "device": device,
        "nvml": nvml is not None,
        "driver": _text(_try(lambda: nvml.nvmlSystemGetDriverVersion())) if nvml else None,
        **versions,
        "started": start,
        "duration_s": round(ended - start, 3),
        "interval_s": interval_s,
        "sampler": sampler,
        "gemm": gemm,
        "gpus": gpus,
        "gemm_totals": [_total(r) for r in rates],
        "series": series.to_dict(),
        "counters": counters,
        "xids_new": xids_new,
        "hbm": hbm,
        "errors": errors,
    }


def _total(r: Rates) -> dict[str, Any]:
    busy = sum(b for _, b, _ in r.done)
    flops = sum(f for _, _, f in r.done)
    return {
        "tflops": round(flops / busy / 1e12, 3) if busy else None,
        "busy_s": round(busy, 3),
        "batches": len(r.done),
        "median_batch_tflops": round(
            statistics.median(f / b for _, b, f in r.done if b > 0) / 1e12, 3
        )
        if r.done
        else None,
    }


def main(argv: list[str] | None = None) -> int:
    """Run; print the record as the last line:

    {"node", "device", "nvml", "driver", "started", "duration_s", "interval_s",
     "gpus": [{"index", "serial", "uuid", "name", "pci", "power_limit_w"}],
     "series": {"t": [...], "gpus": {"0": {"sm_mhz": [...], "reasons": [...], ...}},
                "ports": {"mlx5_0/1": {"symbol_error": [...], "state": [...]}}},
     "counters": {"before": {...}, "after": {...}}, "xids_new": [...],
     "hbm": [{"gpu", "bytes_tested", "fraction_of_free", "mismatched_bytes", ...}],
     "errors": [...]}
    """
    p = argparse.ArgumentParser(prog="burnin", description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=600.0, help="seconds of load")
    p.add_argument("--interval", type=float, default=1.0, help="the sampler's period, seconds")
    p.add_argument("--gemm-s", type=float, default=50.0, help="each GEMM phase, seconds")
    p.add_argument("--hbm-s", type=float, default=10.0, help="each HBM phase, seconds (0: none)")
    p.add_argument("--n", type=int, default=8192, help="the GEMM's matrix size")
    p.add_argument("--hbm-fraction", type=float, default=0.9, help="share of free memory tested")
    p.add_argument("--device", choices=("auto", "cpu"), default="auto")
    p.add_argument("--sysfs-root", default="/", help="where the node's sysfs is mounted")
    p.add_argument("--kernel-log", default=None, help="read XIDs from this file, not dmesg")
    p.add_argument("--xid-every", type=float, default=30.0, help="seconds between XID reads")
    p.add_argument("--no-sampler", action="store_true", help="load only (the sampler's cost)")
    p.add_argument("--out", default=None, help="also write the record to this file")
    p.add_argument("--barrier", action="store_true", help="print READY, wait for a line")
    args = p.parse_args(argv)
    if args.barrier:
        print("READY", flush=True)
        sys.stdin.readline()
    rec = burnin(args)
    text = json.dumps(rec, separators=(",", ":"))
    if args.out:
        Path(args.out).write_text(text)
    print(text, flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
