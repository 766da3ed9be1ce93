"""bench.json's figures as a flat list per node, GPU and link: the one adapter.

Why: bench.json's shape grows (localisation adds per-node, per-GPU and per-link figures);
the metric families, the drift comparison and the benchmark read `BenchFigure`s only, so
a change of bench.json's format touches `figures_of` and nothing else.

bench.json holds: ResNet50 throughput and scaling efficiency per scale point, allreduce
bus bandwidth over the link the launch crossed, storage read throughput per node, and with
localisation (`data.localise`, schema 1, validation.bench.localisation.stages) each link between two
nodes, each node's GPUs and inner allreduce, and each rank of the scaling runs. Units are
converted to base units here (bytes/s, FLOP/s, seconds, ratios), as Prometheus names them.

    >>> [f.metric for f in figures_of(record.data)]
    ['resnet50_images_per_second', ...]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rackcert.core.stage_records import BenchData

# metric (rackcert_bench_<metric>) -> help text and whether higher is better.
METRICS: dict[str, tuple[str, bool]] = {
    "resnet50_images_per_second": ("ResNet50 synthetic training throughput, all GPUs", True),
    "resnet50_images_per_gpu_per_second": ("ResNet50 throughput per GPU", True),
    "resnet50_scaling_efficiency_ratio": ("Weak-scaling efficiency against linear", True),
    "allreduce_busbw_bytes_per_second": (
        "Allreduce bus bandwidth at the largest sizes (nccl-tests' busbw)",
        True,
    ),
    "allreduce_busbw_line_rate_ratio": ("Allreduce busbw over the link's line rate", True),
    "storage_read_bytes_per_second": ("Parallel random-read throughput of the data mount", True),
    # localisation (bench.json data.localise, schema 1): per link, node and GPU
    "link_bandwidth_bytes_per_second": (
        "Node-to-node bandwidth of one link (iperf3 or ib_write_bw)",
        True,
    ),
    "gemm_flops_per_second": ("Matrix-multiply throughput of one GPU (or the node's CPU)", True),
    "host_to_device_bytes_per_second": ("Host-to-GPU copy bandwidth of one GPU", True),
    "device_to_host_bytes_per_second": ("GPU-to-host copy bandwidth of one GPU", True),
    "memcpy_bytes_per_second": ("Memory copy bandwidth of the node's CPU", True),
    "node_allreduce_busbw_bytes_per_second": ("Allreduce busbw among one node's GPUs", True),
    "rank_images_per_second": ("ResNet50 images/s of one rank of a scaling run", True),
}
LOCALISE_SCHEMA = 1  # the bench.json data.localise version this adapter reads


@dataclass(frozen=True)
class BenchFigure:
    """One bench figure and where it was measured (empty node/gpu/link: the whole rack).

    A figure between two nodes names both: `node` and `peer` (the link heat map's rows and
    columns); `link` is the kind of link crossed (nvlink, pcie, sys, nic, loopback).
    """

    metric: str
    value: float
    node: str = ""
    gpu: str = ""
    link: str = ""
    peer: str = ""
    scale: tuple[tuple[str, str], ...] = field(default=())  # e.g. (("nodes","2"),("gpus","4"))

    @property
    def higher_is_better(self) -> bool:
        return METRICS[self.metric][1]

    @property
    def key(self) -> tuple[str, str, str, str, str, tuple[tuple[str, str], ...]]:
        return (self.metric, self.node, self.gpu, self.link, self.peer, self.scale)

    def describe(self) -> str:
        where = " ".join(f"{k}={v}" for k, v in self.scale)
        parts = [
            self.metric,
            self.gpu and f"gpu={self.gpu}",
            self.peer and f"peer={self.peer}",
            self.link and f"link={self.link}",
        ]
        return " ".join(p for p in [*parts, where] if p)


def figures_of(data: BenchData) -> list[BenchFigure]:
    """Every figure bench.json's data holds, in base units."""
    out: list[BenchFigure] = []
    if data.resnet50:
        for p in data.resnet50.points:
            scale: tuple[tuple[str, str], ...] = (("nodes", str(p.nodes)), ("gpus", str(p.gpus)))
            out.append(BenchFigure("resnet50_images_per_second", p.images_per_sec, scale=scale))
            out.append(
                BenchFigure(
                    "resnet50_images_per_gpu_per_second", p.images_per_sec_per_gpu, scale=scale
                )
            )
            out.append(BenchFigure("resnet50_scaling_efficiency_ratio", p.efficiency, scale=scale))
    ar = data.allreduce
    if ar and ar.points and ar.world_size > 1:  # one rank moves nothing: busbw is 0
        busbw = ar.busbw_largest_gbps or max(p.busbw_gbps for p in ar.points)
        link = ar.link or ""
        scale = (("ranks", str(ar.world_size)),)
        out.append(
            BenchFigure("allreduce_busbw_bytes_per_second", busbw * 1e9, link=link, scale=scale)
        )
        if ar.busbw_fraction is not None:
            out.append(
                BenchFigure(
                    "allreduce_busbw_line_rate_ratio", ar.busbw_fraction, link=link, scale=scale
                )
            )
    out += localise_figures(getattr(data, "localise", None))  # absent before localisation
    if data.storage and not data.storage.skipped:
        for n in data.storage.nodes:
            out.append(
                BenchFigure(
                    "storage_read_bytes_per_second", n.throughput_mb_s * 1e6, node=n.node or ""
                )
            )
    return out


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def localise_figures(loc: Any) -> list[BenchFigure]:
    """bench.json `data.localise` (validation.bench.localisation.stages, schema 1) as figures: each
    link's bandwidth (node and peer; its RTT is left out: a second n(n-1)/2 series set),
    each node's GPUs (or CPU) and its inner allreduce, each rank of the scaling runs.
    Anything else, or another schema, gives no figures (never a guess)."""
    if not isinstance(loc, dict) or loc.get("schema") != LOCALISE_SCHEMA:
        return []
    out: list[BenchFigure] = []
    for link in loc.get("links") or []:
        if not isinstance(link, dict) or link.get("error"):
            continue
        a, b = str(link.get("a", "")), str(link.get("b", ""))
        if (gbps := _num(link.get("gbps"))) is not None:  # Gb/s -> bytes/s
            out.append(
                BenchFigure("link_bandwidth_bytes_per_second", gbps * 1e9 / 8, a, "", "nic", b)
            )
    per_unit = (
        ("gemm_gflops", "gemm_flops_per_second", 1e9),
        ("h2d_gb_s", "host_to_device_bytes_per_second", 1e9),
        ("d2h_gb_s", "device_to_host_bytes_per_second", 1e9),
        ("memcpy_gb_s", "memcpy_bytes_per_second", 1e9),
    )
    for node in loc.get("nodes") or []:
        if not isinstance(node, dict) or node.get("error"):
            continue
        name = str(node.get("node", ""))
        for unit in node.get("units") or []:
            if not isinstance(unit, dict):
                continue
            gpu = str(unit.get("pci") or unit.get("unit") or "")
            for key, metric, factor in per_unit:
                if (v := _num(unit.get(key))) is not None:
                    out.append(BenchFigure(metric, v * factor, name, gpu))
        ar = node.get("allreduce")
        if isinstance(ar, dict) and (v := _num(ar.get("busbw_gb_s"))) is not None:
            out.append(BenchFigure("node_allreduce_busbw_bytes_per_second", v * 1e9, name))
    for launch in loc.get("ranks") or []:
        if not isinstance(launch, dict):
            continue
        for r in launch.get("ranks") or []:
            if isinstance(r, dict) and (v := _num(r.get("images_per_sec"))) is not None:
                where = (("rank", str(r.get("rank", ""))), ("launch", str(launch.get("label", ""))))
                host, bus = str(r.get("host", "")), str(r.get("bus_id") or "")
                out.append(BenchFigure("rank_images_per_second", v, host, bus, scale=where))
    return out


def gpus_of(data: BenchData) -> list[tuple[str, str]]:
    """(node, PCI bus id) of every GPU a bench launch ran on, as the ranks reported them."""
    seen: dict[tuple[str, str], None] = {}
    for launch in data.launches:
        for r in launch.ranks or []:
            if r.bus_id:
                seen[(r.host, r.bus_id)] = None
    return list(seen)
