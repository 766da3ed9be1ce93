"""A FAKE of NVML (the `pynvml` module of nvidia-ml-py) and of a node's kernel log, for the
burn-in's watch where no GPU exists: a GPU under a GEMM at its power cap, with a fault planted
at a given minute.

What it answers follows NVML's API reference (docs.nvidia.com/deploy/nvml-api): clocks in
MHz (`nvmlDeviceGetClockInfo`), power in milliwatts (`nvmlDeviceGetPowerUsage`,
`nvmlDeviceGetEnforcedPowerLimit`), the clocks-event reasons bitmask
(`nvmlDeviceGetCurrentClocksEventReasons`, nvmlClocksEventReason* bits: SW power cap 0x4,
HW slowdown 0x8, HW thermal 0x40, HW power brake 0x80), `nvmlDeviceGetTotalEccErrors(h,
errorType, counterType)`, `nvmlDeviceGetRemappedRows` -> (corrRows, uncRows, isPending,
failureOccurred), NotSupported for page retirement on Hopper (it remaps rows instead) and for
NVLink on a PCIe card. A healthy H100 at its cap, as seen on the accelerator machine
(NOTES: 688-692 TFLOP/s sustained at 700 W): SM clock near 1,755 MHz, memory 2,619 MHz,
power at the 700 W limit, the SW power-cap reason set, 60-70 C.

The kernel log line of an XID is the driver's own form (NVIDIA's XID catalogue,
docs.nvidia.com/deploy/xid-errors): `NVRM: Xid (PCI:0000:17:00): 79, pid=..., GPU has fallen
off the bus.`

    fake = FakeNvml(gpus=2, clock=sim.now, plant=Plant("dbe", minute=12, gpu=1))
    fake.nvmlDeviceGetTotalEccErrors(fake.nvmlDeviceGetHandleByIndex(1), 1, 0)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

PLANTS = ("xid", "dbe", "hw_slowdown", "sag", "remap_pending", "sbe_storm")


class NVMLError(Exception):
    """pynvml raises NVMLError subclasses; NotSupported is the one burn-in meets most."""


class NVMLError_NotSupported(NVMLError):  # noqa: N801 - pynvml's own name
    pass


@dataclass(frozen=True)
class Plant:
    """One fault: what, from which minute of the run, on which GPU (index)."""

    kind: str
    minute: float
    gpu: int = 0

    def __post_init__(self) -> None:
        if self.kind not in PLANTS:
            raise ValueError(f"unknown plant {self.kind!r}: one of {PLANTS}")


@dataclass
class FakeNvml:
    """The module-level functions burn-in calls, answering for `gpus` fake H100s."""

    gpus: int
    clock: Callable[[], float]  # the run's clock (simulated seconds)
    start: float = 0.0
    plant: Plant | None = None
    kernel_log: Path | None = None
    base_tflops: float = 690.0
    _xid_written: bool = field(default=False, init=False)

    # -- the fault's state -------------------------------------------------------------------
    def _minute(self) -> float:
        return (self.clock() - self.start) / 60.0

    def _on(self, gpu: int, kind: str) -> bool:
        p = self.plant
        return p is not None and p.kind == kind and p.gpu == gpu and self._minute() >= p.minute

    def sm_mhz(self, gpu: int) -> int:
        """A sagging clock falls 40 % from its minute (a failing fan: thermal throttling)."""
        return 1050 if self._on(gpu, "sag") else 1755

    def tflops(self, gpu: int) -> float:
        """What a GEMM gets: in proportion to the SM clock, as on the real part."""
        return self.base_tflops * self.sm_mhz(gpu) / 1755

    def tick(self) -> None:
        """Called by the simulated run each second: the XID reaches the kernel log."""
        p = self.plant
        if (
            p is not None
            and p.kind == "xid"
            and not self._xid_written
            and self._minute() >= p.minute
        ):
            assert self.kernel_log is not None, "an XID plant needs a kernel log file"
            up = self.clock() - self.start + 1000.0
            with self.kernel_log.open("a") as f:
                f.write(
                    f"[{up:12.6f}] NVRM: Xid (PCI:0000:{self.bus(p.gpu)}:00): 79, pid=4242,"
                    " name=python3, GPU has fallen off the bus.\n"
                )
            self._xid_written = True

    def bus(self, gpu: int) -> str:
        return f"{0x17 + 0x20 * gpu:02x}"

    # -- pynvml's API ------------------------------------------------------------------------
    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        pass

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        return "580.159.04"

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return self.gpus

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:  # noqa: N802
        if not 0 <= i < self.gpus:
            raise NVMLError(f"no GPU {i}")
        return i

    def nvmlDeviceGetSerial(self, h: int) -> str:  # noqa: N802
        return f"16523220{h:05d}"

    def nvmlDeviceGetUUID(self, h: int) -> str:  # noqa: N802
        return f"GPU-fake0000-0000-0000-0000-{h:012d}"

    def nvmlDeviceGetName(self, h: int) -> str:  # noqa: N802
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetPciInfo(self, h: int) -> object:  # noqa: N802
        return type("nvmlPciInfo_t", (), {"busId": f"00000000:{self.bus(h).upper()}:00.0"})()

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:  # noqa: N802
        return 700_000

    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:  # noqa: N802
        return self.sm_mhz(h) if kind == 1 else 2619

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:  # noqa: N802
        return 520_000 if self._on(h, "sag") else 699_400

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:  # noqa: N802
        return 88 if self._on(h, "sag") else 66

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:  # noqa: N802
        reasons = 0x4  # SW power cap: a GEMM at the cap
        if self._on(h, "hw_slowdown") and self._minute() < self.plant.minute + 1:  # type: ignore[union-attr]
            reasons |= 0x8  # asserted for one minute, then gone: "ever asserted" must see it
        if self._on(h, "sag"):
            reasons = 0x20  # SW thermal slowdown: the clocks fall as the part heats
        return reasons

    def nvmlDeviceGetTotalEccErrors(self, h: int, error_type: int, counter_type: int) -> int:  # noqa: N802
        if error_type == 1:
            base = 0
            return base + (1 if self._on(h, "dbe") else 0)
        base = 3 if counter_type == 1 else 0  # three SBEs from before this run, aggregate only
        return base + (40 if self._on(h, "sbe_storm") else 0)

    def nvmlDeviceGetRetiredPages(self, h: int, cause: int) -> list[int]:  # noqa: N802
        raise NVMLError_NotSupported("Not Supported")  # Hopper remaps rows

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: int) -> int:  # noqa: N802
        raise NVMLError_NotSupported("Not Supported")

    def nvmlDeviceGetRemappedRows(self, h: int) -> tuple[int, int, int, int]:  # noqa: N802
        pending = self._on(h, "remap_pending")
        return (0, 1 if pending else 0, 1 if pending else 0, 0)

    def nvmlDeviceGetPcieReplayCounter(self, h: int) -> int:  # noqa: N802
        return 0

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:  # noqa: N802
        raise NVMLError_NotSupported("Not Supported")  # a PCIe card: no NVLink

    def nvmlDeviceGetNvLinkErrorCounter(self, h: int, link: int, counter: int) -> int:  # noqa: N802
        raise NVMLError_NotSupported("Not Supported")


def write_ib_port(root: Path, device: str = "mlx5_0", port: int = 1, **counters: int) -> Path:
    """A sysfs-like InfiniBand port (Documentation/ABI/stable/sysfs-class-infiniband):
    `class/infiniband/<dev>/ports/<n>/counters/<name>` and `state` ("4: ACTIVE")."""
    base = root / "class" / "infiniband" / device / "ports" / str(port)
    (base / "counters").mkdir(parents=True, exist_ok=True)
    (base / "state").write_text(counters.pop("state_text", "4: ACTIVE") + "\n")  # type: ignore[arg-type]
    for name in (
        "symbol_error",
        "link_downed",
        "port_rcv_errors",
        "link_error_recovery",
        "port_xmit_discards",
    ):
        (base / "counters" / name).write_text(f"{counters.get(name, 0)}\n")
    return base
