"""`nvidia-smi topo -m` inside a VM -> NVLink pairs between host PCI addresses.

Why: vSphere 7 cannot see NVLink bridges, so the only proof of a pair is the guest's
own view: `nvidia-smi topo -m` prints `NV<n>` (n bonded NVLinks) between two GPUs
joined by a bridge, and PIX/PXB/PHB/NODE/SYS for a plain PCIe path.

Mapping guest GPUs back to host PCI addresses: inside the VM a GPU has a guest PCI
address (e.g. 0000:13:00.0) that has nothing to do with its host address
(0000:17:00.0). rackcert relies on ESXi giving a VM's passthrough devices guest PCI
slots in the order they appear in the VM's configuration (pciPassthru0, 1, ...: device
key order), so the n-th GPU by guest bus id is the VM's n-th GPU passthrough device,
ordered by device key. nvidia-smi numbers GPUs by ascending PCI bus id (its default
enumeration), so GPU<i> of the matrix is the i-th device; when the guest also answers
`nvidia-smi --query-gpu=index,pci.bus_id`, indices are re-sorted by bus id first, so the
rule holds whatever order the driver numbers them in. For the 2-GPU VMs of an NVLink
layout the order cannot change the answer (a pair is a pair either way); it matters for
VMs with more GPUs. A VM whose GPU count differs from its GPU passthrough count cannot
be mapped and is an error naming the VM.

Example:
    matrix = parse_topo(text)                  # TopoMatrix(gpus=['GPU0', 'GPU1'], ...)
    matrix.nvlinks()                           # {(0, 1): 12}
    links = map_to_host(matrix, ["0000:17:00.0", "0000:31:00.0"])
    links.pairs                                # {('0000:17:00.0', '0000:31:00.0'): 12}
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rackcert.core.errors import InputError
from rackcert.core.observed import ObservedVm
from rackcert.core.pci import NVIDIA, vendor
from rackcert.core.spec import normalize_pci
from rackcert.discover.hardware import HostHardware

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_GPU = re.compile(r"^GPU(\d+)$")
_NV = re.compile(r"^NV(\d+)$")
_LINKS = {"X", "SYS", "NODE", "PHB", "PXB", "PIX", "SOC"}


@dataclass(frozen=True)
class TopoMatrix:
    """The GPU x GPU part of `nvidia-smi topo -m`: cells[i][j] between GPUi and GPUj."""

    gpus: list[int]
    cells: dict[tuple[int, int], str]

    def nvlinks(self) -> dict[tuple[int, int], int]:
        """(i, j) with i < j -> number of NVLinks, for every NV# cell."""
        out: dict[tuple[int, int], int] = {}
        for (i, j), cell in self.cells.items():
            found = _NV.fullmatch(cell)
            if found and i < j:
                out[(i, j)] = int(found.group(1))
        return out


def parse_topo(text: str) -> TopoMatrix:
    """Parse `nvidia-smi topo -m` output; raise InputError when it is not such a matrix.

    The header row names the columns (GPU0 GPU1 ... mlx5_0 ... CPU Affinity ...);
    each GPU row starts with its name and has one cell per column. Escape codes
    (nvidia-smi underlines the header) and the legend are ignored.
    """
    lines = [_ANSI.sub("", raw).rstrip() for raw in text.splitlines()]
    header_at = next(
        (i for i, line in enumerate(lines) if line.split() and _GPU.match(line.split()[0])), None
    )
    if header_at is None:
        raise InputError("nvidia-smi topo -m printed no GPU matrix (is the NVIDIA driver loaded?)")
    columns = lines[header_at].split("\t") if "\t" in lines[header_at] else None
    names = [c.strip() for c in columns if c.strip()] if columns else lines[header_at].split()
    gpu_cols = [n for n in names if _GPU.fullmatch(n)]
    cells: dict[tuple[int, int], str] = {}
    rows: list[int] = []
    for line in lines[header_at + 1 :]:
        parts = line.split()
        if not parts or parts[0].startswith("Legend"):
            break
        found = _GPU.fullmatch(parts[0])
        if not found:
            continue
        row = int(found.group(1))
        values = parts[1 : 1 + len(gpu_cols)]
        if len(values) < len(gpu_cols):
            raise InputError(f"nvidia-smi topo -m: row GPU{row} has too few cells: {line!r}")
        for name, value in zip(gpu_cols, values, strict=True):
            if value not in _LINKS and not _NV.fullmatch(value):
                raise InputError(f"nvidia-smi topo -m: unknown link {value!r} in row GPU{row}")
            cells[(row, int(name[3:]))] = value
        rows.append(row)
    if not rows:
        raise InputError("nvidia-smi topo -m printed a header but no GPU rows")
    return TopoMatrix(sorted(rows), cells)


def parse_bus_ids(text: str) -> dict[int, str]:
    """`nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader` -> index -> bus id."""
    out: dict[int, str] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 2 or not parts[0].isdigit():
            continue
        bus = parts[1].lower()
        # nvidia-smi prints an 8-digit domain (00000000:13:00.0); keep the last 4.
        if re.fullmatch(r"[0-9a-f]{8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", bus):
            bus = bus[4:]
        out[int(parts[0])] = normalize_pci(bus)
    return out


@dataclass
class GuestLinks:
    """What one VM showed: NVLink pairs and plain-PCIe pairs, as host PCI addresses."""

    vm: str
    host: str | None
    gpus: list[str] = field(default_factory=list)
    pairs: dict[tuple[str, str], int] = field(default_factory=dict)
    not_linked: set[tuple[str, str]] = field(default_factory=set)


def gpu_passthrough(vm: ObservedVm, host_gpus: set[str]) -> list[str]:
    """Host PCI addresses of the VM's GPU passthrough devices, in device-key order."""
    devices = sorted(vm.passthrough, key=lambda d: d.key)
    out = []
    for dev in devices:
        if dev.backing != "fixed" or not dev.id:
            continue
        pci = normalize_pci(dev.id)
        if pci in host_gpus or vendor(dev.vendor_id) == NVIDIA:
            out.append(pci)
    return out


def map_to_host(
    matrix: TopoMatrix,
    host_pcis: list[str],
    bus_ids: dict[int, str] | None = None,
    *,
    vm: str = "",
    host: str | None = None,
) -> GuestLinks:
    """Guest GPU indices -> host PCI addresses (see the module docstring for the rule)."""
    order = matrix.gpus
    if bus_ids and set(bus_ids) == set(order):
        order = sorted(order, key=lambda i: bus_ids[i])
    if len(order) != len(host_pcis):
        raise InputError(
            f"VM {vm}: the guest sees {len(order)} GPU(s) but the VM has {len(host_pcis)}"
            " GPU passthrough device(s); cannot map guest GPUs to host addresses"
        )
    to_host = dict(zip(order, host_pcis, strict=True))
    links = GuestLinks(vm=vm, host=host, gpus=list(host_pcis))
    nv = matrix.nvlinks()
    for i in order:
        for j in order:
            if i >= j:
                continue
            a, b = sorted((to_host[i], to_host[j]))
            count = nv.get((i, j)) or nv.get((j, i))
            if count:
                links.pairs[(a, b)] = count
            else:
                links.not_linked.add((a, b))
    return links


def apply_links(hardware: list[HostHardware], links: list[GuestLinks]) -> dict[str, set[str]]:
    """Fill or correct nvlink_peer on each host from what its VMs showed.

    A pair seen as NV# becomes a pair (undoing any other pair either GPU was in); two GPUs
    of one VM without NV# between them are not a pair, whatever the catalog said. A GPU
    that no VM held keeps what it had. Returns host name -> {"nodes"} for hosts with
    evidence, which the draft's comments cite.
    """
    by_name = {hw.name: hw for hw in hardware}
    sources: dict[str, set[str]] = {}
    for seen in links:
        hw = by_name.get(seen.host or "")
        if hw is None:
            continue
        sources.setdefault(hw.name, set()).add("nodes")
        multi = _multi_peer(seen)
        for a, b in sorted(seen.not_linked):
            ga, gb = hw.gpu(a), hw.gpu(b)
            if ga and gb and ga.nvlink_peer == b:
                ga.nvlink_peer = gb.nvlink_peer = None
        for a, b in sorted(seen.pairs):
            if a in multi or b in multi:
                continue
            ga, gb = hw.gpu(a), hw.gpu(b)
            if not (ga and gb):
                continue
            for gpu in (ga, gb):
                old = hw.gpu(gpu.nvlink_peer) if gpu.nvlink_peer else None
                if old is not None and old.nvlink_peer == gpu.pci:
                    old.nvlink_peer = None
            ga.nvlink_peer, gb.nvlink_peer = b, a
        for pci in sorted(multi):
            hw.notes.append(
                f"{pci}: NVLinks to several GPUs in VM {seen.vm} (NVSwitch?); nvlink_peer"
                " names one bridge peer only, so it is left as it was"
            )
        hw.pair_source = "nodes"
    return sources


def _multi_peer(seen: GuestLinks) -> set[str]:
    count: dict[str, int] = {}
    for a, b in seen.pairs:
        count[a] = count.get(a, 0) + 1
        count[b] = count.get(b, 0) + 1
    return {pci for pci, n in count.items() if n > 1}
