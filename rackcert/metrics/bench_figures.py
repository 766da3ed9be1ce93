"""bench.json's figures as a flat list per node, GPU and link: the one adapter.

Why: bench.json's shape grows (localisation adds per-node, per-GPU and per-link figures);
the metric families, the drift comparison and the benchmark read `BenchFigure`s only, so
a change of bench.json's format touches `figures_of` and nothing else.

Today's bench.json holds: ResNet50 throughput and scaling efficiency per scale point,
allreduce bus bandwidth over the link the launch crossed, and storage read throughput per
node. Units are converted to base units here (bytes/s, ratios), as Prometheus names them.

    >>> [f.metric for f in figures_of(record.data)]
    ['resnet50_images_per_second', ...]
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rackcert.stage_records import BenchData

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
}


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
    if data.storage and not data.storage.skipped:
        for n in data.storage.nodes:
            out.append(
                BenchFigure(
                    "storage_read_bytes_per_second", n.throughput_mb_s * 1e6, node=n.node or ""
                )
            )
    return out


def gpus_of(data: BenchData) -> list[tuple[str, str]]:
    """(node, PCI bus id) of every GPU a bench launch ran on, as the ranks reported them."""
    seen: dict[tuple[str, str], None] = {}
    for launch in data.launches:
        for r in launch.ranks or []:
            if r.bus_id:
                seen[(r.host, r.bus_id)] = None
    return list(seen)
