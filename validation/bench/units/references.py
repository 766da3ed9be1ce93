"""The reference loops (plain, Horovod's defaults) and the naive configuration, measured in
the same launch as the default: the ratios that say where the default stands."""

from __future__ import annotations

from typing import Any


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
