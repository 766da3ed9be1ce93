"""Pure parsers: the text a tool prints -> a typed value. No host, no spec.

Each parser is tested on output captured from real machines
(tests/support/fixtures/h200/ for nvidia-smi on an H200) and on fakes built from the
tools' documented formats where no such machine was at hand (OFED, mlxconfig).
A parser that cannot make sense of its input raises `ParseError` with the line
it choked on, which a check reports as an error, never as a pass.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from typing import Any

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class ParseError(ValueError):
    """The output did not have the shape the parser knows."""


def _na(value: str) -> str | None:
    """nvidia-smi prints [N/A], N/A or [Not Supported] for fields a GPU lacks."""
    text = value.strip()
    if not text or text.strip("[]").lower() in {"n/a", "not supported", "unknown error"}:
        return None
    return text


def gpu_query_csv(text: str) -> list[dict[str, str | None]]:
    """`nvidia-smi --query-gpu=... --format=csv,nounits` (with header) -> one dict per GPU.

    Keys are the query field names without units (`memory.total`); [N/A] becomes None.
    """
    rows = [ln for ln in text.splitlines() if ln.strip()]
    if not rows or "," not in rows[0] and rows[0].strip() != "index":
        raise ParseError(f"not nvidia-smi CSV: {rows[0][:120] if rows else '(empty)'}")
    reader = csv.reader(io.StringIO("\n".join(rows)), skipinitialspace=True)
    header = [re.sub(r"\s*\[.*\]$", "", h.strip()) for h in next(reader)]
    if "index" not in header and "name" not in header:
        raise ParseError(f"nvidia-smi CSV without a known header: {rows[0][:120]}")
    out = []
    for values in reader:
        if len(values) != len(header):
            raise ParseError(f"nvidia-smi CSV row has {len(values)} fields: {','.join(values)}")
        out.append({k: _na(v) for k, v in zip(header, values, strict=True)})
    return out


def smi_q_header(text: str) -> dict[str, str]:
    """The top of `nvidia-smi -q`: Driver Version, CUDA Version, Attached GPUs."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("GPU "):
            break
        key, sep, value = line.partition(":")
        if sep and key.strip() and not line.startswith(" " * 8):
            out[key.strip()] = value.strip()
    if "Driver Version" not in out:
        raise ParseError("nvidia-smi -q output has no 'Driver Version' line")
    return out


@dataclass(frozen=True)
class SmiHeader:
    """What `nvidia-smi -q` says above its first GPU, and per GPU what the HGX checks read."""

    driver_version: str
    cuda_driver: str | None
    attached_gpus: int | None
    gpus: tuple[SmiGpuStatus, ...] = ()


def smi_header(text: str) -> SmiHeader:
    """`nvidia-smi -q` -> SmiHeader (the CUDA version is the newest the driver supports)."""
    head = smi_q_header(text)
    attached = head.get("Attached GPUs", "")
    return SmiHeader(
        head["Driver Version"],
        head.get("CUDA Version") or None,
        int(attached) if attached.isdigit() else None,
        tuple(smi_gpu_status(text)),
    )


@dataclass
class Topology:
    """`nvidia-smi topo -m`: the link between each pair of devices (X, NV12, PIX, SYS...)."""

    devices: list[str]
    links: dict[tuple[str, str], str] = field(default_factory=dict)
    numa: dict[str, str] = field(default_factory=dict)

    def gpus(self) -> list[str]:
        return [d for d in self.devices if d.startswith("GPU")]

    def link(self, a: str, b: str) -> str | None:
        return self.links.get((a, b))


def topo_matrix(text: str) -> Topology:
    lines = [_ANSI.sub("", ln).rstrip() for ln in text.splitlines()]
    header_i = next((i for i, ln in enumerate(lines) if re.match(r"^\s+GPU0\b", ln)), None)
    if header_i is None:
        raise ParseError("nvidia-smi topo -m output has no GPU0 header")
    cols = [c.strip() for c in lines[header_i].strip().split("\t") if c.strip()]
    devices = [c for c in cols if re.fullmatch(r"(GPU|NIC|mlx\w*)\d*", c)]
    topo = Topology(devices=devices)
    for line in lines[header_i + 1 :]:
        if not line.strip() or line.startswith("Legend"):
            break
        cells = [c.strip() for c in line.split("\t")]
        name = cells[0]
        if not re.fullmatch(r"(GPU|NIC)\d+", name):
            continue
        values = [c for c in cells[1:]]
        for j, dev in enumerate(devices):
            if j < len(values):
                topo.links[(name, dev)] = values[j]
        if "NUMA Affinity" in cols:
            k = cols.index("NUMA Affinity")
            if k < len(values):
                topo.numa[name] = values[k]
    return topo


@dataclass
class NvlinkGpu:
    index: int
    name: str
    active: list[float] = field(default_factory=list)
    inactive: int = 0


def nvlink_status(text: str) -> list[NvlinkGpu]:
    """`nvidia-smi nvlink -s` -> per GPU, the speeds (GB/s) of its active links."""
    gpus: list[NvlinkGpu] = []
    for line in text.splitlines():
        head = re.match(r"^GPU (\d+): (.*?)(?: \(UUID: .*\))?$", line.strip())
        if head:
            gpus.append(NvlinkGpu(int(head.group(1)), head.group(2)))
            continue
        link = re.match(r"^Link (\d+): (.*)$", line.strip())
        if link and gpus:
            speed = re.match(r"([\d.]+) GB/s", link.group(2))
            if speed:
                gpus[-1].active.append(float(speed.group(1)))
            else:
                gpus[-1].inactive += 1
    return gpus


_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\): (\d+)(?:, (.*))?")


def xid_events(text: str) -> list[tuple[str, int, str]]:
    """Kernel log lines `NVRM: Xid (PCI:0000:17:00): 79, ...` -> (pci, xid, rest)."""
    return [
        (m.group(1), int(m.group(2)), (m.group(3) or "").strip())
        for m in (_XID.search(ln) for ln in text.splitlines())
        if m
    ]


def module_names(text: str) -> set[str]:
    """/proc/modules -> loaded module names."""
    return {ln.split()[0] for ln in text.splitlines() if ln.strip()}


def proc_modules(lines: list[str]) -> dict[str, dict[str, str]]:
    """/proc/modules lines -> {name: {size, used, state}} (`used` may be '-')."""
    out = {}
    for line in lines:
        parts = line.split()
        if len(parts) >= 5:
            out[parts[0]] = {"size": parts[1], "used": parts[2], "state": parts[4]}
    return out


def cuda_toolkit(text: str) -> str | None:
    """/usr/local/cuda/version.json or `nvcc --version` -> '12.4.1' (None when neither)."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except ValueError as exc:
            raise ParseError(f"version.json is not JSON: {exc}") from None
        version = (data.get("cuda") or {}).get("version")
        return str(version) if version else None
    match = re.search(r"release ([\d.]+), V([\d.]+)", text)
    if match:
        return match.group(2)
    return None


def ofed_version(text: str) -> str:
    """`ofed_info -s` -> 'MLNX_OFED_LINUX-5.4-3.1.0.0:' -> '5.4-3.1.0.0'."""
    line = text.strip().splitlines()[0].strip().rstrip(":") if text.strip() else ""
    match = re.match(r"^(?:MLNX_OFED_LINUX|OFED-internal|OFED|DOCA[-_]\w+)-(.+)$", line)
    if not match:
        raise ParseError(f"ofed_info -s printed {line[:120]!r}, not an OFED version")
    return match.group(1)


@dataclass(frozen=True)
class RdmaPort:
    device: str
    port: int
    netdev: str
    up: bool


def ibdev2netdev(text: str) -> list[RdmaPort]:
    """`ibdev2netdev` lines `mlx5_0 port 1 ==> ens1f0np0 (Up)`."""
    ports = []
    for line in text.splitlines():
        m = re.match(r"^(\S+) port (\d+) ==> (\S+) \((\w+)\)", line.strip())
        if m:
            ports.append(RdmaPort(m.group(1), int(m.group(2)), m.group(3), m.group(4) == "Up"))
    return ports


def ib_rates(text: str) -> dict[str, float]:
    """`/sys/class/infiniband/<dev>/ports/<n>/rate: 100 Gb/sec (2X HDR)` -> {dev/port: Gb/s}."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^/sys/class/infiniband/([^/]+)/ports/(\d+)/rate: ([\d.]+) Gb/sec", line)
        if m:
            out[f"{m.group(1)}/{m.group(2)}"] = float(m.group(3))
    return out


def mlxconfig_ats(text: str) -> dict[str, str]:
    """`mlxconfig q ATS_ENABLED` -> {device PCI address: 'True(1)' or 'False(0)'}."""
    out: dict[str, str] = {}
    device = None
    for line in text.splitlines():
        m = re.match(r"^Device:\s+(\S+)", line.strip())
        if m:
            device = m.group(1)
            continue
        m = re.match(r"^ATS_ENABLED\s+(\S+)", line.strip())
        if m and device:
            out[device] = m.group(1)
    return out


def ctk_version(text: str) -> str | None:
    m = re.search(r"version ([\d.]+)", text)
    return m.group(1) if m else None


def docker_runtimes(text: str) -> list[str] | None:
    """`docker info --format '{{json .Runtimes}}'` -> runtime names (None: no JSON line)."""
    lines = text.strip().splitlines()
    try:
        data = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    return sorted(data) if isinstance(data, dict) else None


def cdi_gpus(text: str) -> list[str]:
    """`nvidia-ctk cdi list` -> the numbered GPU devices (nvidia.com/gpu=0, ...)."""
    return sorted({m.group(1) for m in re.finditer(r"nvidia\.com/gpu=(\d+)", text)})


@dataclass(frozen=True)
class Mount:
    mount_point: str
    root: str
    fstype: str
    source: str
    options: frozenset[str]


def mountinfo(text: str) -> list[Mount]:
    """/proc/self/mountinfo -> mounts; options are the per-mount and super-block ones together."""
    out = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        a, b = left.split(), right.split()
        if len(a) < 6 or len(b) < 3:
            continue
        unescape = lambda s: s.replace("\\040", " ").replace("\\011", "\t")  # noqa: E731
        opts = frozenset(a[5].split(",")) | frozenset(b[2].split(","))
        out.append(Mount(unescape(a[4]), unescape(a[3]), b[0], unescape(b[1]), opts))
    return out


@dataclass
class NetState:
    mtu: dict[str, int] = field(default_factory=dict)
    addrs: dict[str, list[str]] = field(default_factory=dict)
    default_dev: str | None = None
    interfaces: dict[str, dict[str, str]] = field(default_factory=dict)


def net_state(text: str) -> NetState:
    """The NetInterfaces fact: `if NAME|mtu|mac|state|speed|driver pci` per interface,
    `mtu IF N`, `addr <ip -o -4 addr line>`, `route <default route>`."""
    state = NetState()
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "if":
            parts = rest.split("|")
            if len(parts) == 6:
                name, mtu, mac, oper, speed, dev = parts
                driver, _, pci = dev.partition(" ")
                state.interfaces[name] = {
                    "mtu": mtu,
                    "mac": mac,
                    "state": oper,
                    "speed_mbps": speed,
                    "driver": driver,
                    "pci": pci,
                }
                if mtu.strip().isdigit():
                    state.mtu[name] = int(mtu)
        elif kind == "mtu":
            name, _, value = rest.partition(" ")
            if value.strip().isdigit():
                state.mtu[name] = int(value)
        elif kind == "addr":
            m = re.match(r"^\d+:\s+(\S+)\s+inet\s+([\d.]+)/", rest)
            if m:
                state.addrs.setdefault(m.group(1).split("@")[0], []).append(m.group(2))
        elif kind == "route":
            m = re.search(r"\bdev (\S+)", rest)
            if m and state.default_dev is None:
                state.default_dev = m.group(1)
    return state


def clock_synced(text: str) -> tuple[bool, str]:
    """The `clock` probe (timedatectl or chronyc) -> (synchronised?, what it said)."""
    m = re.search(r"NTPSynchronized=(\w+)", text)
    if m:
        return m.group(1) == "yes", f"timedatectl NTPSynchronized={m.group(1)}"
    m = re.search(r"Leap status\s*:\s*(.+)", text)
    if m:
        status = m.group(1).strip()
        return status == "Normal", f"chronyc leap status {status}"
    raise ParseError(f"no clock status in: {text.strip()[:120]}")


def os_release(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip().strip('"')
    return out


@dataclass(frozen=True)
class PeerResult:
    name: str
    rc: int
    message: str


# What a TCP connect to a peer's port said: reached (open: something listens; refused: the
# peer's kernel answered RST, so no firewall stood between), or not (filtered: no answer
# within the time, a DROP; any other errno, e.g. EHOSTUNREACH, which firewalld's default
# reject, icmp-host-prohibited, gives the caller).
REACHED = frozenset({"open", "refused"})


def firewall_reach(text: str) -> dict[tuple[str, int], str]:
    """`reach PEER PORT STATE` lines -> {(peer, port): state}."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^reach (\S+) (\d+) (\S+)$", line.strip())
        if m:
            out[(m.group(1), int(m.group(2)))] = m.group(3)
    return out


@dataclass
class AvcReport:
    """SELinux's mode (enforcing, permissive, disabled), whether an audit log was there,
    and this boot's AVC denials (the records' text from `avc:` on)."""

    mode: str = "unknown"
    audit_log: bool = False
    denials: list[str] = field(default_factory=list)


_AVC_RE = re.compile(r"^type=AVC msg=audit\((\d+)(?:\.\d+)?:\d+\): (avc: +denied .*)$")


def selinux_denials(text: str) -> AvcReport:
    """`mode 1|0|disabled`, `btime EPOCH`, then the audit log's `type=AVC` lines (or `no
    audit log`) -> the denials whose time is at or after the boot."""
    modes = {"1": "enforcing", "0": "permissive", "disabled": "disabled"}
    report = AvcReport(audit_log=True)
    boot = 0
    lines = text.splitlines()
    for line in lines:
        if line.startswith("mode "):
            report.mode = modes.get(line[5:].strip(), "unknown")
        elif line.startswith("btime "):
            boot = int(line[6:].strip() or 0)
        elif line.strip() == "no audit log":
            report.audit_log = False
    for line in lines:
        m = _AVC_RE.match(line.strip())
        if m and int(m.group(1)) >= boot:
            report.denials.append(re.sub(r" +", " ", m.group(2)))
    return report


def ssh_peers(text: str) -> dict[str, PeerResult]:
    out = {}
    for line in text.splitlines():
        m = re.match(r"^peer (\S+) rc=(\d+) ?(.*)$", line)
        if m:
            out[m.group(1)] = PeerResult(m.group(1), int(m.group(2)), m.group(3).strip())
    return out


def dcgm_diag_json(text: str) -> dict[str, Any]:
    """`dcgmi diag -r N -j` -> {version, results: [{test, category, entity, status,
    warnings}]}, statuses lower-case (pass, fail, warn, skip...).

    Two shapes, as DCGM documents them: 3.x nests tests under "DCGM GPU Diagnostic" ->
    "test_categories" -> "tests" -> "results" (per GPU "gpu_ids"/"gpu_id", warnings as
    strings or {"warning": ...}); 4.x has "tests" at the top with "results" per
    entity ("entity_group", "entity_id") and warnings as {"message": ...}. Any line
    dcgmi prints before the JSON document is ignored.
    """
    start = text.find("{")
    if start < 0:
        raise ParseError("dcgmi printed no JSON document")
    try:
        doc = json.loads(text[start : text.rfind("}") + 1])
    except json.JSONDecodeError as exc:
        raise ParseError(f"dcgmi JSON: {exc}") from None
    results: list[dict[str, Any]] = []

    def warnings(entry: dict[str, Any]) -> list[str]:
        out = []
        for w in entry.get("warnings") or []:
            if isinstance(w, dict):
                out.append(str(w.get("message") or w.get("warning") or w))
            else:
                out.append(str(w))
        return out

    def add(test: dict[str, Any], category: str | None) -> None:
        for entry in test.get("results") or []:
            entity = entry.get("entity_id", entry.get("gpu_id", entry.get("gpu_ids")))
            results.append(
                {
                    "test": test.get("name", "?"),
                    "category": category,
                    "entity": None if entity is None else str(entity),
                    "status": str(entry.get("status", "?")).lower(),
                    "warnings": warnings(entry),
                }
            )

    legacy = doc.get("DCGM GPU Diagnostic")
    if isinstance(legacy, dict):
        for cat in legacy.get("test_categories") or []:
            for test in cat.get("tests") or []:
                add(test, cat.get("category"))
        version = legacy.get("version")
    else:
        for test in doc.get("tests") or []:
            add(test, test.get("category"))
        version = doc.get("version")
    if not results:
        raise ParseError("dcgmi JSON holds no test results")
    return {"version": version, "results": results}


@dataclass(frozen=True)
class SmiGpuStatus:
    """Per GPU of `nvidia-smi -q`: its SXM module, fabric and vGPU licence as the guest sees them.

    "Fabric" (State, Status) is where an NVSwitch system reports Fabric Manager's work on the
    GPU (Completed / Success when its NVLinks are trained into the fabric); "vGPU Software
    Licensed Product" (License Status) is where a vGPU guest reports its licence. Values are
    as printed ("N/A" where the guest does not report them); None when the section is absent.
    """

    bus_id: str
    module_id: str | None = None
    fabric_state: str | None = None
    fabric_status: str | None = None
    license_status: str | None = None
    licensed_product: str | None = None


_SMI_FIELDS = {
    ("Platform Info", "Module Id"): "module_id",
    ("Fabric", "State"): "fabric_state",
    ("Fabric", "Status"): "fabric_status",
    ("vGPU Software Licensed Product", "License Status"): "license_status",
    ("vGPU Software Licensed Product", "Product Name"): "licensed_product",
}


def smi_gpu_status(text: str) -> list[SmiGpuStatus]:
    """`nvidia-smi -q` -> one SmiGpuStatus per `GPU <bus id>` section."""
    gpus: list[dict[str, str]] = []
    section = ""
    for line in text.splitlines():
        head = re.match(r"^GPU ([0-9A-Fa-f:.]+)\s*$", line)
        if head:
            gpus.append({"bus_id": head.group(1)})
            section = ""
            continue
        if not gpus:
            continue
        indent = len(line) - len(line.lstrip(" "))
        key, sep, value = line.strip().partition(":")
        if indent == 4 and not sep:
            section = key.strip()
        elif indent == 4:
            section = ""
        elif indent == 8 and sep:
            name = _SMI_FIELDS.get((section, key.strip()))
            if name:
                gpus[-1][name] = value.strip()
    return [SmiGpuStatus(**g) for g in gpus]


def running_versions(lines: list[str]) -> dict[str, list[str]]:
    """`## name` sections of RunningVersions into name -> non-empty lines; the NVIDIA
    loaded line ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  <date>") cut to
    its version."""
    out: dict[str, list[str]] = {}
    cur = ""
    for raw in lines:
        line = raw.strip()
        if line.startswith("## "):
            cur = line[3:]
            out[cur] = []
        elif cur and line:
            if cur == "nvidia_loaded":
                m = re.search(r"Kernel Module\s+([0-9][0-9.]*)", line)
                line = m.group(1) if m else line
            out[cur].append(line)
    return out
