"""The metric families rackcert exports, built from stage records with prometheus_client.

Why one module: the names, help texts and label sets are a contract with the alert rules
(monitoring/prometheus/rackcert.rules.yml) and the dashboard; they are written down once,
here. Naming follows Prometheus' conventions (base units, `_seconds`, `_info` for string
facts as labels on a constant 1) and per-GPU labels follow DCGM exporter's names (`gpu`,
`UUID`, `pci_bus_id`) so a join with DCGM's series needs no relabelling; DCGM's
`modelName` is `model_name` here, because `promtool check metrics` rejects camelCase.

Every label value from a node goes through `labels.label` (escaped by prometheus_client,
bounded by us), and samples with equal label sets are merged (the worse value kept): a
hostile or duplicated node string can neither break the file nor add a series.

    families = validate_families(record, spec="lab", drift=items)
    text = exposition(families)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from rackcert.core.results import CheckResult, Status
from rackcert.core.stage_records import BenchRecord, StageRecord, ValidateRecord
from rackcert.metrics.bench_figures import METRICS, BenchFigure, figures_of, gpus_of
from rackcert.metrics.certified_drift import DriftItem
from rackcert.metrics.labels import label

_BAD = (Status.failed, Status.error)
PREFIX = "rackcert_"


class Family:
    """One gauge family: fixed label names, samples merged by label set (max value)."""

    def __init__(self, name: str, doc: str, labels: Sequence[str]) -> None:
        self.name, self.doc, self.labels = PREFIX + name, doc, tuple(labels)
        self.samples: dict[tuple[str, ...], float] = {}

    def set(self, value: float, **labels: object) -> None:
        key = tuple(label(labels.get(n, "")) for n in self.labels)
        old = self.samples.get(key)
        self.samples[key] = value if old is None else max(old, float(value))

    def metric(self) -> Metric:
        g = GaugeMetricFamily(self.name, self.doc, labels=list(self.labels))
        for key, value in self.samples.items():
            g.add_metric(list(key), float(value))
        return g


class _Snapshot(Collector):
    def __init__(self, families: Iterable[Family]) -> None:
        self.families = [f for f in families if f.samples]

    def collect(self) -> Iterator[Metric]:
        for f in self.families:
            yield f.metric()


def exposition(families: Iterable[Family]) -> bytes:
    """The text exposition format (version 0.0.4) of the families that hold samples."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(families))
    return generate_latest(registry)


def _epoch(stamp: str) -> float | None:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def run_families(record: StageRecord, spec: str, stage: str) -> list[Family]:
    """When the stage last ran, how long it took and whether it finished ok."""
    ts = Family(
        "last_run_timestamp_seconds",
        "When the stage finished, seconds since the epoch",
        ("spec", "stage"),
    )
    took = Family("run_duration_seconds", "Wall time of the stage", ("spec", "stage"))
    ok = Family("run_ok", "1 when the stage passed (no error-severity failure)", ("spec", "stage"))
    start, end = _epoch(record.started_at), _epoch(record.finished_at)
    if end is not None:
        ts.set(end, spec=spec, stage=stage)
        if start is not None:
            took.set(max(end - start, 0.0), spec=spec, stage=stage)
    ok.set(1.0 if record.status == "ok" else 0.0, spec=spec, stage=stage)
    return [ts, took, ok]


def check_family(name: str, doc: str, results: Iterable[CheckResult], spec: str) -> Family:
    """1 for a failed (or errored) check, 0 for a passed one; skipped checks are left out."""
    fam = Family(name, doc, ("spec", "node", "check", "severity"))
    for r in results:
        if r.status is Status.skipped:
            continue
        fam.set(
            1.0 if r.status in _BAD else 0.0,
            spec=spec,
            node=r.node,
            check=r.id,
            severity=r.severity.value,
        )
    return fam


def _number(value: Any) -> float | None:
    try:
        return float(str(value).split()[0])
    except (ValueError, IndexError):
        return None


def gpu_families(spec: str, gpus: dict[str, list[dict[str, Any]]]) -> list[Family]:
    """Per GPU, from facts.json's nvidia-smi rows, with DCGM exporter's label names."""
    ids = ("spec", "node", "gpu", "UUID", "pci_bus_id")
    info = Family(
        "gpu_info",
        "A GPU as validate saw it (labels: model, driver, VBIOS); always 1",
        (*ids, "model_name", "driver_version", "vbios_version"),
    )
    width = Family("gpu_pcie_link_width", "PCIe link width in lanes, current", ids)
    gen = Family("gpu_pcie_link_generation", "PCIe link generation, current", ids)
    for node, rows in gpus.items():
        for i, g in enumerate(rows):
            where = {
                "spec": spec,
                "node": node,
                "gpu": g.get("index", i),
                "UUID": g.get("uuid") or "",
                "pci_bus_id": g.get("pci.bus_id") or "",
            }
            info.set(
                1.0,
                **where,
                model_name=g.get("name") or "",
                driver_version=g.get("driver_version") or "",
                vbios_version=g.get("vbios_version") or "",
            )
            for fam, key in ((width, "pcie.link.width.current"), (gen, "pcie.link.gen.current")):
                value = _number(g.get(key))
                if value is not None:
                    fam.set(value, **where)
    return [info, width, gen]


def _drift_items_family() -> Family:
    return Family(
        "drift",
        "One item that differs from the last certified run (1: worse, 0: changed)",
        ("spec", "node", "kind", "item", "before", "after"),
    )


def _set_drift(family: Family, spec: str, d: DriftItem) -> None:
    family.set(
        1.0 if d.worse else 0.0,
        spec=spec,
        node=d.node,
        kind=d.kind,
        item=d.item,
        before=d.before,
        after=d.after,
    )


def drift_families(
    spec: str, nodes: Iterable[str], drift: list[DriftItem] | None, certified: str | None
) -> list[Family]:
    """The drift items, and per node how many (0 included, so `> 0` alerts and resolves)."""
    compared = Family(
        "drift_compared",
        "1 when this validate was compared with a certified run (0: none on record)",
        ("spec", "certified_run"),
    )
    per_node = Family(
        "drift_items",
        "Items that differ from the last certified run, per node",
        ("spec", "node"),
    )
    items = _drift_items_family()
    compared.set(1.0 if drift is not None else 0.0, spec=spec, certified_run=certified or "")
    if drift is None:
        return [compared]
    counts = dict.fromkeys(nodes, 0)
    for d in drift:
        counts[d.node] = counts.get(d.node, 0) + 1
        _set_drift(items, spec, d)
    for node, n in counts.items():
        per_node.set(float(n), spec=spec, node=node)
    return [compared, per_node, items]


def validate_families(
    record: ValidateRecord,
    spec: str,
    *,
    gpus: dict[str, list[dict[str, Any]]] | None = None,
    drift: list[DriftItem] | None = None,
    certified: str | None = None,
) -> list[Family]:
    """Everything a validate run says: checks, nodes, versions, GPUs, drift, timing."""
    data = record.data
    up = Family("node_up", "1 when validate reached the node", ("spec", "node"))
    failed = Family(
        "node_failed", "1 when an error-severity check failed on the node", ("spec", "node")
    )
    versions = Family(
        "node_version_info",
        "A version or count the checks observed on the node; always 1",
        ("spec", "node", "component", "version"),
    )
    count = Family("node_gpus", "GPUs nvidia-smi listed on the node (gpu.count)", ("spec", "node"))
    for node, info in data.nodes.items():
        gpus_seen = _number(info.versions.get("gpu_count"))
        if gpus_seen is not None:
            count.set(gpus_seen, spec=spec, node=node)
        if info.reachable is not None:
            up.set(1.0 if info.reachable else 0.0, spec=spec, node=node)
        failed.set(1.0 if info.status == "failed" else 0.0, spec=spec, node=node)
        for comp, version in info.versions.items():
            versions.set(1.0, spec=spec, node=node, component=comp, version=version)
    checks = check_family(
        "check_failed",
        "1 when the validate check failed or could not run, 0 when it passed",
        data.results,
        spec,
    )
    return [
        *run_families(record, spec, "validate"),
        checks,
        up,
        failed,
        count,
        versions,
        *gpu_families(spec, gpus or {}),
        *drift_families(spec, data.nodes, drift, certified),
    ]


def health_families(
    results: list[CheckResult],
    spec: str,
    node: str,
    *,
    seconds: float,
    finished: float,
    action: str,
) -> list[Family]:
    """The Slurm health check on one node: its checks, whether the node is drained by
    rackcert, when it ran and how long it took."""
    drained = Family(
        "health_check_drained",
        "1 when the node is drained by rackcert's health check",
        ("spec", "node"),
    )
    drained.set(1.0 if action in ("drain", "kept-own-drain") else 0.0, spec=spec, node=node)
    # Own families, with the node: the validate/bench ones are per spec, and one family's
    # label names must agree across every textfile node_exporter merges.
    ts = Family(
        "health_check_last_run_timestamp_seconds",
        "When the health check finished on the node, seconds since the epoch",
        ("spec", "node"),
    )
    ts.set(finished, spec=spec, node=node)
    took = Family(
        "health_check_duration_seconds", "Wall time of the health check", ("spec", "node")
    )
    took.set(seconds, spec=spec, node=node)
    ok = Family(
        "health_check_ok", "1 when no error-severity check failed on the node", ("spec", "node")
    )
    ok.set(
        0.0 if any(r.status in _BAD and r.severity.value == "error" for r in results) else 1.0,
        spec=spec,
        node=node,
    )
    checks = check_family(
        "health_check_failed",
        "1 when the health check's check failed or could not run, 0 when it passed",
        results,
        spec,
    )
    return [ts, took, ok, checks, drained]


def bench_families(
    record: BenchRecord,
    spec: str,
    figures: list[BenchFigure] | None = None,
    *,
    drift: list[DriftItem] | None = None,
    certified: str | None = None,
) -> list[Family]:
    """Bench's figures per node, GPU and link, its verdict and the GPUs it ran on.

    figures: the record's own (`figures_of`) unless given (benchmarks/metrics_scale.py
    adds the localisation's per-node, per-GPU and per-link figures to size them).
    """
    data = record.data
    figures = figures_of(data) if figures is None else figures
    out: dict[str, Family] = {}
    for f in figures:
        fam = out.get(f.metric)
        if fam is None:
            names = ("spec", "node", "gpu", "peer", "link", *(k for k, _ in f.scale))
            fam = out[f.metric] = Family("bench_" + f.metric, METRICS[f.metric][0], names)
        fam.set(
            f.value, spec=spec, node=f.node, gpu=f.gpu, peer=f.peer, link=f.link, **dict(f.scale)
        )
    passed = Family("bench_verdict_passed", "1 when bench's verdict is PASS", ("spec", "verdict"))
    verdict_checks = Family(
        "bench_check_failed",
        "1 when a bench threshold failed, 0 when it passed (not judged: left out)",
        ("spec", "check"),
    )
    if data.verdict is not None:
        passed.set(1.0 if data.verdict.passed else 0.0, spec=spec, verdict=data.verdict.verdict)
        for c in data.verdict.checks:
            if c.status is not Status.skipped:
                verdict_checks.set(1.0 if c.status in _BAD else 0.0, spec=spec, check=c.id)
    gpu = Family(
        "bench_gpu_info", "A GPU a bench rank ran on; always 1", ("spec", "node", "pci_bus_id")
    )
    for node, bus in gpus_of(data):
        gpu.set(1.0, spec=spec, node=node, pci_bus_id=bus)
    compared = Family(
        "bench_drift_compared",
        "1 when this bench was compared with a certified run's bench (0: none on record)",
        ("spec", "certified_run"),
    )
    compared.set(1.0 if drift is not None else 0.0, spec=spec, certified_run=certified or "")
    items = _drift_items_family()
    for d in drift or []:
        _set_drift(items, spec, d)
    families = [*out.values(), passed, verdict_checks, gpu, compared, items]
    return [*run_families(record, spec, "bench"), *families]
