"""A benchmark's options, declared once in its unit's file, read alike by BenchOptions and the
worker (validation/bench/node/declare.py); a typed result's strings cut in a copy."""

from __future__ import annotations

from typing import Any

import pytest

from rackcert.core.results import AllreducePoint, AllreduceResult
from rackcert.core.untrusted import CAP, cap_model
from tests.support.bench_declare import CPU
from validation.bench import units
from validation.bench.node import worker
from validation.bench.node.declare import Opt
from validation.bench.options import BenchOptions
from validation.bench.orchestrate import worker_args
from validation.bench.units.base import BenchUnit

SAMPLE: dict[str, Any] = {"int": 64, "float": 2.5, "str": "resnet18", "bool": False}


def _sample(opt: Opt) -> Any:
    return opt.choices[-1] if opt.choices else SAMPLE[opt.kind]


def test_every_worker_option_reaches_the_worker_with_its_value() -> None:
    """Each declared worker option, given to BenchOptions, is parsed back by the worker's
    own argparse to the same value; the others never reach the worker."""
    declared = units.declared_options()
    passed = {n: _sample(o) for n, o in declared.items() if o.worker}
    assert {"max_bytes", "batch", "precision", "compile", "compile_mode"} <= set(passed)
    args = worker_args(BenchOptions.of(**passed, storage_dir="/data"), CPU, ["resnet"])
    parsed = worker.parse(args)
    assert {n: getattr(parsed, n) for n in passed} == passed
    assert not hasattr(parsed, "storage_dir") and "--storage-dir" not in args
    # none given: no declarations, nothing but the launch's own arguments
    assert worker_args(BenchOptions(), CPU, ["resnet"]) == ["--tasks", "resnet", "--device", "cpu"]


def test_one_option_two_declarations_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    class Twin(BenchUnit):
        name = "twin_batch"
        options = (Opt("batch", "int", "Another batch"),)

    monkeypatch.setattr(units, "UNITS", (*units.UNITS, Twin()))
    with pytest.raises(ValueError, match="'batch' is declared twice"):
        units.declared_options()


def test_cap_model_cuts_strings_in_a_copy_of_the_same_class() -> None:
    point = AllreducePoint(
        size_bytes=8, count=2, time_us=1.0, algbw_gbps=1.0, busbw_gbps=1.0, correct=True
    )
    long = "x" * (CAP + 50)
    result = AllreduceResult(backend="gloo", device="cpu", world_size=2, points=[point], note=long)
    cut = cap_model(result, where="artifacts/bench")
    assert type(cut) is AllreduceResult and cut.points == result.points
    assert cut.note is not None and len(cut.note) < len(long) and result.note == long
