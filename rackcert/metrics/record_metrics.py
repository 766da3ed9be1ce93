"""From a run directory to metric families: what the CLI and serve call.

Why separate from `families`: this part reads files (facts.json, the certified run's
records) and finds the certified run; `families` only shapes records into metrics.

    drift = drift_since_certified(run_dir, Path("runs"))
    write_textfile(path, validate_run_families(run_dir, Path("runs"), record, drift))
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rackcert.core.runs import RunDir
from rackcert.core.stage_records import BenchRecord, ValidateRecord
from rackcert.metrics.certified_drift import DriftItem, bench_drift, gpu_rows, validate_drift
from rackcert.metrics.families import (
    Family,
    bench_families,
    health_families,
    validate_families,
)


def drift_since_certified(
    run: RunDir, root: Path, stage: str = "validate"
) -> tuple[list[DriftItem], str] | None:
    """Drift of this run's `stage` (validate or bench) from the rack's last certified (PASS)
    run before it, with that run's id; None: there is no certified run."""
    from rackcert.core.runs import last_certified

    certified = last_certified(root, run.meta["rack"], before=run.path)
    if certified is None:
        return None
    compare = bench_drift if stage == "bench" else validate_drift
    return compare(certified, run), certified.path.name


def validate_inputs(
    run: RunDir, root: Path, record: ValidateRecord
) -> tuple[dict[str, list[dict[str, Any]]], list[DriftItem] | None, str | None]:
    """facts.json's GPUs, the drift items and the certified run's id, for one validate run."""
    found = drift_since_certified(run, root)
    drift, certified = found if found is not None else (None, None)
    return gpu_rows(run, record), drift, certified


def validate_run_families(
    run: RunDir, record: ValidateRecord, found: tuple[list[DriftItem], str] | None
) -> list[Family]:
    """The validate families of one run, with the drift already computed by the caller."""
    drift, certified = found if found is not None else (None, None)
    return validate_families(
        record, record.rack, gpus=gpu_rows(run, record), drift=drift, certified=certified
    )


def bench_run_families(
    record: BenchRecord, found: tuple[list[DriftItem], str] | None
) -> list[Family]:
    """The bench families of one run, with its figures' drift (computed by the caller)."""
    drift, certified = found if found is not None else (None, None)
    return bench_families(record, record.rack, drift=drift, certified=certified)


def bench_drift_lines(
    record: BenchRecord, run: RunDir, root: Path, textfile: Path | None, *, quiet: bool
) -> list[str]:
    """After `rackcert bench`: its figures against the certified run's bench, written to
    `textfile` when given; returns the lines to print (none with `quiet`, i.e. --json).

    One call from the CLI, so that bench's command stays a list of steps."""
    from rackcert.core.untrusted import visible
    from rackcert.metrics.textfile import write_textfile

    found = drift_since_certified(run, root, "bench")
    if textfile is not None:
        write_textfile(textfile, bench_run_families(record, found))
    if quiet or found is None:
        return []
    items, certified = found
    head = f"figures against the certified run {visible(certified)}: {len(items)} beyond tolerance"
    return [head, *(item.line() for item in items)]


def health_outcome_families(outcome: Any, spec: str, finished: float) -> list[Family]:
    """validation.healthcheck's HealthOutcome as the health-check families."""
    return health_families(
        list(outcome.results),
        spec,
        outcome.node,
        seconds=float(outcome.seconds),
        finished=finished,
        action=str(outcome.action),
    )
