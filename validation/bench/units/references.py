"""The reference loops (plain, Horovod's defaults) and the naive configuration, measured in
the same launch as the default: the ratios that say where the default stands."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from rackcert.core.stage_records import Model
from validation.bench.node.declare import Opt
from validation.bench.options import BenchOptions, Engine, Point
from validation.bench.units.base import BenchUnit, Context
from validation.bench.units.resnet import describe

# -- its part of bench.json (registered with the spine's BenchData: BenchUnit.parts) ----


class NaiveRun(Model):
    images_per_sec: float
    spread: float
    config: dict[str, Any]
    warmup_s: float | None = None


class NaiveVsDefault(Model):
    world_size: int
    naive: NaiveRun
    default: NaiveRun
    ratio: float = Field(description="default / naive images/s")


class ReferenceRun(NaiveRun):
    """One training loop's figure in the references block."""

    loss_finite: bool | None = None
    description: str | None = Field(None, description="What this reference loop is")


class References(Model):
    """The reference loops timed in the same launch as the default, and the default's ratio
    to each (per GPU: batch sizes may differ)."""

    world_size: int
    default: ReferenceRun
    plain: ReferenceRun | None = None
    default_vs_plain: float | None = None
    horovod_defaults: ReferenceRun | None = None
    default_vs_horovod_defaults: float | None = None


def naive_vs_default(raw: dict[str, Any]) -> dict[str, Any] | None:
    if "naive" not in raw or "resnet" not in raw:
        return None
    fast, slow = raw["resnet"], raw["naive"]
    return {
        "world_size": raw["world_size"],
        "naive": {
            "images_per_sec": slow["images_per_sec"],
            "spread": slow["spread"],
            "config": slow["config"],
        },
        "default": {
            "images_per_sec": fast["images_per_sec"],
            "spread": fast["spread"],
            "config": fast["config"],
            "warmup_s": fast["warmup_s"],
        },
        "ratio": fast["images_per_sec"] / slow["images_per_sec"],
    }


REFERENCES = {
    "plain": "plain loop: torch.compile, fp16 autocast + GradScaler, channels_last, plain SGD,"
    " no DDP wrapper",
    "horovod_ref": "Horovod synthetic-benchmark defaults: eager fp32, NCHW, batch 32, SGD"
    " without momentum",
}


def references(raw: dict[str, Any]) -> dict[str, Any] | None:
    """The reference loops measured in the same launch as the default, and the ratios of
    the default's images/s to each (per GPU, so batch sizes may differ)."""
    if "resnet" not in raw or not any(k in raw for k in REFERENCES):
        return None
    fast = raw["resnet"]
    out: dict[str, Any] = {"world_size": raw["world_size"], "default": _row(fast)}
    for key, what in REFERENCES.items():
        if key in raw:
            name = "horovod_defaults" if key == "horovod_ref" else key
            out[name] = {**_row(raw[key]), "description": what}
            out[f"default_vs_{name}"] = fast["images_per_sec"] / raw[key]["images_per_sec"]
    return out


def _row(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "images_per_sec": r["images_per_sec"],
        "spread": r["spread"],
        "warmup_s": r["warmup_s"],
        "loss_finite": r["loss_finite"],
        "config": r["config"],
    }


def _first_point_of(
    opts_value: bool | None, engine: Engine, point: Point, points: list[Point]
) -> bool:
    """The comparisons run in the smallest launch, on GPUs unless told."""
    wanted = opts_value if opts_value is not None else engine.device == "cuda"
    return bool(wanted) and point == points[0]


def _last_answer_with(ctx: Context, key: str) -> dict[str, Any] | None:
    return next((r for _p, r in reversed(ctx.answers) if key in r and "resnet" in r), None)


class NaiveUnit(BenchUnit):
    """The naive configuration (eager fp32, NCHW) beside the default: what defaults are worth."""

    name = "naive_vs_default"
    parts: ClassVar[dict[str, Any]] = {"naive_vs_default": NaiveVsDefault}
    keeps_answer = True
    skip_word = "resnet"
    help = "the naive training configuration against the default"
    options = (Opt("naive", "bool", "Also time a naive eager fp32 NCHW loop (default: on GPUs)"),)

    def tasks(
        self, opts: BenchOptions, engine: Engine, point: Point, points: list[Point]
    ) -> list[str]:
        return ["naive"] if _first_point_of(opts.naive, engine, point, points) else []

    def launch_line(self, task: str, answer: dict[str, Any]) -> str | None:
        return describe(answer)

    def run(self, ctx: Context) -> dict[str, Any] | None:
        raw = _last_answer_with(ctx, "naive")
        return naive_vs_default(raw) if raw else None

    def say(self, ctx: Context, result: dict[str, Any]) -> list[str]:
        return ["  " + line for line in self.lines({self.name: result})]

    def lines(self, data: dict[str, Any]) -> list[str]:
        nd = data.get("naive_vs_default")
        if not nd:
            return []
        return [
            f"naive {nd['naive']['images_per_sec']:.1f} vs default"
            f" {nd['default']['images_per_sec']:.1f} images/s: x{nd['ratio']:.2f}"
        ]


class ReferencesUnit(BenchUnit):
    """The reference loops (plain, Horovod's defaults) in the same launch as the default."""

    name = "references"
    parts: ClassVar[dict[str, Any]] = {"references": References}
    keeps_answer = True
    skip_word = "resnet"
    help = "reference training loops timed beside the default"
    options = (
        Opt(
            "references",
            "bool",
            "Also time two reference loops: a plain compiled fp16 loop and Horovod's"
            " synthetic-benchmark defaults (default: on GPUs)",
        ),
    )

    def tasks(
        self, opts: BenchOptions, engine: Engine, point: Point, points: list[Point]
    ) -> list[str]:
        return (
            ["plain", "horovod_ref"]
            if _first_point_of(opts.references, engine, point, points)
            else []
        )

    def launch_line(self, task: str, answer: dict[str, Any]) -> str | None:
        return describe(answer)

    def run(self, ctx: Context) -> References | None:
        raw = next(
            (
                r
                for _p, r in reversed(ctx.answers)
                if "resnet" in r and any(k in r for k in REFERENCES)
            ),
            None,
        )
        refs = references(raw) if raw else None
        return References.model_validate(refs) if refs else None

    def say(self, ctx: Context, result: References) -> list[str]:
        got = result.model_dump()
        return [
            f"  {name} {got[name]['images_per_sec']:.1f} images/s: default"
            f" x{got[f'default_vs_{name}']:.2f}"
            for name in ("plain", "horovod_defaults")
            if got.get(name)
        ]

    def lines(self, data: dict[str, Any]) -> list[str]:
        refs = data.get("references") or {}
        return [
            f"{name} reference {refs[name]['images_per_sec']:.1f} images/s: default"
            f" x{refs[f'default_vs_{name}']:.2f}"
            for name in ("plain", "horovod_defaults")
            if refs.get(name)
        ]
