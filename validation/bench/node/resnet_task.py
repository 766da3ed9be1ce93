"""The worker tasks of the training loop (validation.bench.node.resnet_loop): `resnet` (the
default configuration, with the launch's overrides), `naive` (eager fp32 NCHW) and the
fixed references `plain` and `horovod_ref`. Registered with the worker by name
(validation.bench.node.tasks); the controller's sides are validation.bench.units.resnet and
validation.bench.units.references."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from validation.bench.node import resnet_loop
from validation.bench.node.tasks import given, task


def train_config(args: argparse.Namespace, device_type: str) -> resnet_loop.TrainConfig:
    cfg = resnet_loop.TrainConfig.for_device(device_type, args.quick)
    if args.profile == "naive":
        cfg = cfg.naive()
    mode = given(args, "compile_mode")
    overrides = {
        k: v
        for k, v in {
            "model": given(args, "model"),
            "batch": given(args, "batch"),
            "image_size": given(args, "image_size"),
            "precision": given(args, "precision"),
            "compile": given(args, "compile"),
            "compile_mode": None if mode == "default" else mode,
            "compile_optimizer": given(args, "compile_optimizer"),
            "fused_optimizer": args.fused,
            "channels_last": args.channels_last,
            "cudnn_benchmark": args.cudnn_benchmark,
            "warmup_steps": args.warmup_steps,
            "settle_s": args.settle_s,
            "intervals": args.intervals,
            "steps_per_interval": args.steps_per_interval,
        }.items()
        if v is not None
    }
    if mode == "default":
        overrides["compile_mode"] = None
    return replace(cfg, **overrides)


def reference_config(
    args: argparse.Namespace, device_type: str, which: str
) -> resnet_loop.TrainConfig:
    """The fixed reference loops, on the same schedule as the default (model and image size
    may be overridden, the recipe may not). Horovod's batch 32 runs 8x the steps per
    interval, so its intervals time as many images as the default's."""
    base = resnet_loop.TrainConfig.for_device(device_type, args.quick)
    for key, value in (("model", given(args, "model")), ("image_size", given(args, "image_size"))):
        if value is not None:
            base = replace(base, **{key: value})
    if which == "plain":
        return base.plain()
    ref = base.horovod_defaults()
    scale = max(1, base.batch // ref.batch)
    return replace(ref, steps_per_interval=base.steps_per_interval * scale)


@task("resnet")
def resnet(comm: Any, args: argparse.Namespace) -> dict[str, Any]:
    return resnet_loop.train(comm, train_config(args, comm.device.type))


@task("naive")
def naive(comm: Any, args: argparse.Namespace) -> dict[str, Any]:
    return resnet_loop.train(comm, train_config(args, comm.device.type).naive())


@task("plain")
def plain(comm: Any, args: argparse.Namespace) -> dict[str, Any]:
    return resnet_loop.train(comm, reference_config(args, comm.device.type, "plain"))


@task("horovod_ref")
def horovod_ref(comm: Any, args: argparse.Namespace) -> dict[str, Any]:
    return resnet_loop.train(comm, reference_config(args, comm.device.type, "horovod"))
