"""The benchmarks, one file each: `UNITS` lists them, in the order they run and are judged.

Each is a `validation.bench.units.base.BenchUnit`: its name (bench.json's key, `--skip`'s
word), the worker tasks it needs in each launch, `run(ctx)` (its part of the record),
`checks(data, certification)` (its verdict checks), `lines(data)` (its screen lines) and its
`options` (declared once: `rackcert bench`'s flags, BenchOptions' values, the worker's args)
and `parts` (its blocks of bench.json with their models, which the spine's BenchData reads
through `unit_parts`).
The run loop (validation.bench.orchestrate), the verdict (validation.bench.verdict),
`--skip` (validation.bench.options) and the display (rackcert.cli.display) read this tuple.
docs/architecture.md, "A benchmark", shows how to add one.
"""

from __future__ import annotations

from typing import Any

from rackcert.core import stage_records
from rackcert.core.errors import InputError
from validation.bench import options
from validation.bench.node.declare import Opt
from validation.bench.units.allreduce import AllreduceUnit
from validation.bench.units.base import BenchUnit
from validation.bench.units.nccl_tests import NcclTestsUnit
from validation.bench.units.rdma import RdmaUnit
from validation.bench.units.references import NaiveUnit, ReferencesUnit
from validation.bench.units.resnet import ResnetUnit
from validation.bench.units.storage import StorageUnit

UNITS: tuple[BenchUnit, ...] = (
    AllreduceUnit(),
    ResnetUnit(),
    NaiveUnit(),
    ReferencesUnit(),
    NcclTestsUnit(),
    RdmaUnit(),
    StorageUnit(),
)


def declared_options(units: tuple[BenchUnit, ...] | None = None) -> dict[str, Opt]:
    """Every unit's options by name, in UNITS' order; a name two units declare is refused
    (one option, one declaration)."""
    out: dict[str, Opt] = {}
    for unit in UNITS if units is None else units:
        for opt in unit.options:
            if opt.name in out and out[opt.name] is not opt:
                raise ValueError(f"bench option {opt.name!r} is declared twice ({unit.name})")
            out[opt.name] = opt
    return out


options.declarations_from(declared_options)


def unit_parts() -> dict[str, Any]:
    """Every unit's blocks of bench.json with their models, in UNITS' order; a key two
    units claim is refused (one block, one owner)."""
    out: dict[str, Any] = {}
    for unit in UNITS:
        for key, shape in unit.parts.items():
            if key in out and out[key] is not shape:
                raise ValueError(f"bench.json block {key!r} is claimed twice ({unit.name})")
            out[key] = shape
    return out


stage_records.bench_parts_from(unit_parts)


def check_skip(skip: set[str] | frozenset[str], flag: str = "--skip") -> None:
    """Refuse a word no unit has, in one line naming the flag (before anything runs)."""
    words = skip_words()
    unknown = sorted(set(skip) - set(words))
    if unknown:
        raise InputError(f"{flag} {unknown[0]!r}: choose from {', '.join(words)}")


def skip_words(units: tuple[BenchUnit, ...] | None = None) -> tuple[str, ...]:
    """What `--skip` knows, in UNITS' order: each unit's word, once."""
    return tuple(dict.fromkeys(u.word for u in (UNITS if units is None else units)))
