"""ResNet50 weak scaling on the controller: speedup and efficiency over the launches'
figures. The training loop runs on the nodes (validation.bench.node.resnet_loop)."""

from __future__ import annotations

from typing import Any

from rackcert.core.results import ScalingPoint, ScalingResult, VerdictCheck
from rackcert.core.spec import Certification
from validation.bench.node.declare import Opt
from validation.bench.options import BenchOptions, Engine, Point
from validation.bench.units.base import BenchUnit, Context, check

COMPILE_MODES = ("auto", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


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
            "intervals": r["config"].get("intervals"),
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
    timed = c.get("intervals", 0) * c.get("steps_per_interval", 0)
    # How much was timed, and the +- only where two or more intervals measured one.
    spread = "one interval, no +-" if c.get("intervals") == 1 else f"+- {r['spread']:,.1f}"
    steps = f"; {timed} timed step{'s' if timed != 1 else ''} ({spread})" if timed else ""
    return (
        f"{r['images_per_sec']:,.1f} images/s ({per_gpu:,.1f} per GPU) at {c['precision']},"
        f" batch {c['batch']}/GPU, {how}; warm-up {r['warmup_s']:.1f} s{steps}"
    )


class ResnetUnit(BenchUnit):
    """ResNet50 weak scaling: one launch per point, speedup and efficiency against linear."""

    name = "resnet50"
    keeps_answer = True
    skip_word = "resnet"
    help = "ResNet50 synthetic training, weak scaling over the points"
    options = (
        Opt(
            "compile_mode",
            "str",
            "torch.compile mode: auto (the default mode at every scale), default,"
            " reduce-overhead, max-autotune, max-autotune-no-cudagraphs",
            choices=COMPILE_MODES,
            worker=True,
        ),
        Opt(
            "compile_optimizer",
            "bool",
            "Compile the optimizer step too (bf16/fp32: no gradient scaler)",
            worker=True,
        ),
        Opt("compile", "bool", "torch.compile the model (default: on GPUs)", worker=True),
        Opt("batch", "int", "Images per GPU per step", minimum=1, worker=True),
        Opt("model", "str", "torchvision model (resnet50)", worker=True),
        Opt("image_size", "int", "Synthetic image side (224)", minimum=16, worker=True),
        Opt(
            "precision", "str", "fp16, bf16 or fp32", choices=("fp16", "bf16", "fp32"), worker=True
        ),
    )

    def tasks(
        self, opts: BenchOptions, engine: Engine, point: Point, points: list[Point]
    ) -> list[str]:
        return ["resnet"]

    def launch_line(self, task: str, answer: dict[str, Any]) -> str | None:
        return describe(answer)

    def run(self, ctx: Context) -> ScalingResult | None:
        measured = [(p, r["resnet"]) for p, r in ctx.answers if "resnet" in r]
        return scaling_result(measured, ctx.engine) if measured else None

    def checks(self, data: dict[str, Any], cert: Certification) -> list[VerdictCheck]:
        sc = ScalingResult.model_validate(data["resnet50"]) if data.get("resnet50") else None
        raw = [ln["resnet"] for ln in data.get("launches") or [] if ln.get("resnet")]
        return [scaling_efficiency(sc, cert), images_per_gpu(sc, cert), training_sane(raw)]


def scaling_efficiency(sc: ScalingResult | None, cert: Certification) -> VerdictCheck:
    """Every multi-unit point's efficiency against N x the baseline >= the spec's minimum."""
    expected = f">= {cert.scaling_efficiency_min:g}"
    if sc is None or not sc.points:
        return check("resnet50.scaling_efficiency", None, "", expected, "ResNet50 not run")
    multi = [p for p in sc.points if p.gpus > min(q.gpus for q in sc.points)]
    if not multi:
        return check(
            "resnet50.scaling_efficiency",
            None,
            "one point",
            expected,
            "only one scale measured; nothing to compare against",
        )
    worst = min(multi, key=lambda p: p.efficiency)
    observed = f"{worst.efficiency:.3f} at {worst.gpus} GPUs ({worst.nodes} node(s))"
    return check(
        "resnet50.scaling_efficiency",
        worst.efficiency >= cert.scaling_efficiency_min,
        observed,
        expected,
    )


def images_per_gpu(sc: ScalingResult | None, cert: Certification) -> VerdictCheck:
    """The slowest point's images/s per GPU >= the spec's minimum (0 or absent: not judged)."""
    floor = cert.resnet50_images_per_gpu_min
    expected = f">= {floor:g} images/s per GPU" if floor else "a threshold"
    if sc is None or not sc.points:
        return check("resnet50.images_per_gpu", None, "", expected, "ResNet50 not run")
    worst = min(sc.points, key=lambda p: p.images_per_sec_per_gpu)
    observed = f"{worst.images_per_sec_per_gpu:.1f} at {worst.gpus} GPUs"
    if not floor:
        return check(
            "resnet50.images_per_gpu",
            None,
            observed,
            expected,
            "no threshold: certification.resnet50_images_per_gpu_min is 0 or absent",
        )
    return check(
        "resnet50.images_per_gpu", worst.images_per_sec_per_gpu >= floor, observed, expected
    )


def training_sane(raw: list[dict[str, Any]]) -> VerdictCheck:
    """The training loss stayed finite on every rank of every launch (no NaN from AMP)."""
    if not raw:
        return check("resnet50.loss_finite", None, "", "finite loss", "ResNet50 not run")
    bad = [r.get("world_size") for r in raw if not r.get("loss_finite", False)]
    observed = "finite" if not bad else f"non-finite loss at world sizes {bad}"
    return check("resnet50.loss_finite", not bad, observed, "finite loss")
