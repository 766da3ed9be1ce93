"""Drift: what changed on each node since the rack's last certified (PASS) run.

Why: `report diff` tells an auditor what changed; an operator needs the same thing as
one alertable item per node and component, every time validate runs. A driver upgraded
on one node, a PCIe link retrained to x8, a GPU gone, a check that passed at
certification and fails now, a node's bench figure down beyond its tolerance: each is a
`DriftItem`, exported as `rackcert_drift` and printed as one line by validate.

The certified run is the report's baseline (`rackcert.core.runs.last_certified`); this
module only reads the two runs' records, never the spec.

    >>> items = validate_drift(certified_run, this_run)  # bench_drift: the figures
    >>> [item.line() for item in items]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rackcert.core.results import Status
from rackcert.core.runs import RunDir, read_json
from rackcert.core.stage_records import BenchRecord, ValidateRecord
from rackcert.core.untrusted import cap, visible
from rackcert.metrics.bench_figures import BenchFigure, figures_of

# Checks whose observed value is a version or a hardware property: a change is drift even
# when both values pass (a driver moved within its pinned branch). Not gpu.pcie.link: its
# observation holds the current PCIe generation, which an idle GPU lowers to save power;
# the link is compared per GPU below, by width and by the generation the link allows.
OBSERVED_CHECKS = (
    "gpu.count",
    "gpu.model",
    "gpu.driver",
    "gpu.cuda.driver",
    "gpu.cuda.toolkit",
    "ofed.version",
    "rdma.speed",
    "container.toolkit",
    "os.release",
)
# Per-GPU properties from facts.json (nvidia-smi --query-gpu fields): firmware and link.
# The link's generation is `pcie.link.gen.max` (what GPU and slot trained to allow), not
# `.current` (lower while the GPU idles: NVIDIA's power management, not a fault).
GPU_FIELDS = {
    "vbios_version": "vbios",
    "pcie.link.width.current": "pcie_width",
    "pcie.link.gen.max": "pcie_gen_max",
    "name": "model",
}
TOLERANCE = 0.05  # a bench figure moves when it changes by more than this fraction
# GPU rows read per node from facts.json: an HGX board has 8, no server 64; a planted
# facts.json with a million rows must not become a million series.
MAX_GPUS_PER_NODE = 64
LINE_CAP = 200  # characters of one node-derived value in a drift line
_BAD = (Status.failed, Status.error)


@dataclass(frozen=True)
class DriftItem:
    """One thing that differs from the certified run.

    kind: version (ValidateNode.versions), observed (a check's observed value), check (a
    check's status), gpu (a GPU's VBIOS/link/model from facts), firmware (NIC firmware
    from facts), figure (bench).
    """

    node: str
    kind: str
    item: str
    before: str
    after: str
    worse: bool = False

    def line(self) -> str:
        """One plain line for the CLI's output: values shown (never interpreted) and cut."""
        mark = " (worse)" if self.worse else ""

        def v(text: str) -> str:
            return cap(visible(text), LINE_CAP) or "-"

        where = f"{v(self.node)} {self.kind} {v(self.item)}"
        return f"drift {where}: {v(self.before)} -> {v(self.after)}{mark}"


def _validate(run: RunDir) -> ValidateRecord | None:
    record = run.read_record("validate")
    return record if isinstance(record, ValidateRecord) else None


def _bench(run: RunDir) -> BenchRecord | None:
    record = run.read_record("bench")
    return record if isinstance(record, BenchRecord) else None


def node_facts(run: RunDir, record: ValidateRecord | None) -> dict[str, dict[str, Any]]:
    """facts.json's facts per node ({} without facts: `validate --no-facts`)."""
    if record is None or not record.data.facts:
        return {}
    path = run.path / record.data.facts
    if not path.is_file():
        return {}
    nodes = (read_json(path) or {}).get("nodes") or {}
    return {str(n): f for n, f in nodes.items() if isinstance(f, dict)}


def gpu_rows(run: RunDir, record: ValidateRecord | None) -> dict[str, list[dict[str, Any]]]:
    """facts.json's per-GPU rows per node, at most MAX_GPUS_PER_NODE each."""
    out: dict[str, list[dict[str, Any]]] = {}
    for node, facts in node_facts(run, record).items():
        gpus = facts.get("gpus")
        if isinstance(gpus, list):
            out[node] = [g for g in gpus[:MAX_GPUS_PER_NODE] if isinstance(g, dict)]
    return out


def _firmware(facts: dict[str, dict[str, Any]]) -> dict[tuple[str, str], str]:
    """NIC firmware per node: facts.json's `nic_firmware.version` (validation.nic_firmware:
    the distinct versions of the node's device-backed NICs, joined by "; ")."""
    out = {}
    for node, f in facts.items():
        nic = f.get("nic_firmware")
        version = nic.get("version") if isinstance(nic, dict) else None
        if isinstance(version, str) and version:
            out[(node, "nic_firmware")] = version
    return out


# Items where a lower number is a loss of hardware: a GPU gone, a PCIe link retrained down.
_LOWER_IS_WORSE = ("gpu_count", "pcie_width", "pcie_gen_max")


def _lower(before: str, after: str) -> bool:
    try:
        return float(after.split()[0]) < float(before.split()[0])
    except (ValueError, IndexError):
        return False


def _pair_items(
    before: dict[tuple[str, str], str], after: dict[tuple[str, str], str], kind: str
) -> list[DriftItem]:
    """Items whose value differs; a node or item present in one run only is not compared
    (a --node or --check filter leaves them out)."""
    out = []
    for key in sorted(before.keys() & after.keys()):
        a, b = before[key], after[key]
        if a != b:
            worse = key[1].endswith(_LOWER_IS_WORSE) and _lower(a, b)
            out.append(DriftItem(key[0], kind, key[1], a, b, worse))
    return out


def _versions(record: ValidateRecord | None) -> dict[tuple[str, str], str]:
    if record is None:
        return {}
    return {
        (node, comp): str(v)
        for node, info in record.data.nodes.items()
        for comp, v in info.versions.items()
    }


def _observed(record: ValidateRecord | None) -> dict[tuple[str, str], str]:
    if record is None:
        return {}
    return {
        (r.node, r.id): r.observed
        for r in record.data.results
        if r.id in OBSERVED_CHECKS and r.status in (Status.passed, Status.failed) and r.observed
    }


def _statuses(record: ValidateRecord | None) -> dict[tuple[str, str], tuple[Status, str]]:
    if record is None:
        return {}
    return {(r.node, r.id): (r.status, r.severity.value) for r in record.data.results}


def _check_items(before: ValidateRecord | None, after: ValidateRecord | None) -> list[DriftItem]:
    """Checks that passed at certification and fail now (or the other way): skips that
    became runs or runs that became skips are not drift (a --check filter does that)."""
    sa, sb = _statuses(before), _statuses(after)
    out = []
    for key in sorted(sa.keys() & sb.keys()):
        (a, _), (b, severity) = sa[key], sb[key]
        if Status.skipped in (a, b) or (a in _BAD) == (b in _BAD):
            continue
        worse = b in _BAD and severity == "error"
        out.append(DriftItem(key[0], "check", key[1], a.value, b.value, worse))
    return out


def _gpu_key(gpu: dict[str, Any], index: int) -> str:
    return str(gpu.get("pci.bus_id") or gpu.get("index") or index)


def _gpu_items(
    before: dict[str, list[dict[str, Any]]], after: dict[str, list[dict[str, Any]]]
) -> list[DriftItem]:
    fa: dict[tuple[str, str], str] = {}
    fb: dict[tuple[str, str], str] = {}
    for rows, into in ((before, fa), (after, fb)):
        for node, gpus in rows.items():
            for i, gpu in enumerate(gpus):
                for field, short in GPU_FIELDS.items():
                    if gpu.get(field) is not None:
                        into[(node, f"{_gpu_key(gpu, i)} {short}")] = str(gpu[field])
    return _pair_items(fa, fb, "gpu")


def figure_drift(before: list[BenchFigure], after: list[BenchFigure]) -> list[DriftItem]:
    fa = {f.key: f for f in before}
    out = []
    for f in after:
        was = fa.get(f.key)
        if was is None or was.value == 0:
            continue
        change = (f.value - was.value) / abs(was.value)
        if abs(change) <= TOLERANCE:
            continue
        worse = change < 0 if f.higher_is_better else change > 0
        out.append(
            DriftItem(
                f.node or "rack",
                "figure",
                f.describe(),
                f"{was.value:.6g}",
                f"{f.value:.6g}",
                worse,
            )
        )
    return out


def validate_drift(certified: RunDir, current: RunDir) -> list[DriftItem]:
    """What validate saw differently from `certified`: versions, observed values, check
    statuses, GPUs. A node absent from either run is not compared (a --node filter)."""
    va, vb = _validate(certified), _validate(current)
    items = _pair_items(_versions(va), _versions(vb), "version")
    items += _pair_items(_observed(va), _observed(vb), "observed")
    items += _check_items(va, vb)
    items += _gpu_items(gpu_rows(certified, va), gpu_rows(current, vb))
    fa, fb = node_facts(certified, va), node_facts(current, vb)
    items += _pair_items(_firmware(fa), _firmware(fb), "firmware")
    return items


def bench_drift(certified: RunDir, current: RunDir) -> list[DriftItem]:
    """Bench figures that moved beyond the tolerance since `certified` (kind figure); none
    when either run has no bench.json, which is not drift.

    Kept apart from `validate_drift` because the two are written by different commands
    (validate's and bench's textfiles): no item is ever in both files.
    """
    ba, bb = _bench(certified), _bench(current)
    if ba is None or bb is None:
        return []
    return figure_drift(figures_of(ba.data), figures_of(bb.data))
