"""ResNet50 weak scaling on the controller: speedup and efficiency over the launches'
figures. The training loop runs on the nodes (validation.bench.node.resnet_loop)."""

from __future__ import annotations

from typing import Any

from rackcert.core.results import ScalingPoint, ScalingResult
from validation.bench.options import Engine, Point


def scaling(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Speedup and efficiency of each point against N x the smallest point's figure.

    Each point has `nodes`, `gpus` and `images_per_sec`; the baseline is the point with the
    fewest GPUs (1 node or 1 GPU), as in the seed's table: speedup = total / baseline
    total, efficiency = total / (gpus / baseline gpus x baseline total).
    """
    if not points:
        return []
    base = min(points, key=lambda p: p["gpus"])
    out = []
    for p in sorted(points, key=lambda p: p["gpus"]):
        speedup = p["images_per_sec"] / base["images_per_sec"]
        ideal = p["gpus"] / base["gpus"]
        out.append({**p, "speedup": speedup, "efficiency": speedup / ideal})
    return out


def scaling_result(measured: list[tuple[Point, dict[str, Any]]], engine: Engine) -> ScalingResult:
    rows = [
        {
            "nodes": p.nodes,
            "gpus": p.gpus,
            "images_per_sec": r["images_per_sec"],
            "images_per_sec_per_gpu": r["images_per_sec_per_gpu"],
            "spread": r["spread"],
            "warmup_s": r.get("warmup_s"),
        }
        for p, r in measured
    ]
    cfg = measured[0][1]["config"]
    base = min(measured, key=lambda m: m[0].gpus)[0]
    unit = "GPU" if engine.device == "cuda" else "rank"
    return ScalingResult(
        model=cfg["model"],
        batch_per_gpu=cfg["batch"],
        precision=cfg["precision"],
        channels_last=cfg["channels_last"],
        compiled=all(r["config"]["compiled"] for _p, r in measured),
        device=engine.device,
        backend=engine.name,
        baseline=f"{base.nodes} node(s), {base.gpus} {unit}(s)",
        points=[ScalingPoint(**row) for row in scaling(rows)],
    )


def describe(r: dict[str, Any]) -> str:
    """A training figure with what it was judged at, as MLPerf and the seed label theirs:
    images/s, precision, batch per GPU, the compile mode, and the warm-up it took."""
    c = r["config"]
    how = "eager"
    if c.get("compiled"):
        how = "compiled, CUDA graphs" if c.get("cuda_graphs") else "compiled"
    per_gpu = r.get("images_per_sec_per_gpu", r["images_per_sec"])
    return (
        f"{r['images_per_sec']:,.1f} images/s ({per_gpu:,.1f} per GPU) at {c['precision']},"
        f" batch {c['batch']}/GPU, {how}; warm-up {r['warmup_s']:.1f} s"
    )
