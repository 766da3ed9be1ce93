"""/metrics for `rackcert serve`: the latest run of each spec, as one exposition.

Why: a Prometheus server that scrapes the controller sees every rack at once without a
textfile per rack. For each rack directory under the runs root, the newest run that holds
a readable validate.json gives the validate families (with its drift from the certified
run), and the newest readable bench.json the bench families. The runs directory is not
trusted: a record that does not load is skipped, and counted in
`rackcert_metrics_unreadable_runs`, never a 500 for the whole page.

    body = runs_exposition(Path("runs"))
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from rackcert.core.runs import RunDir, run_paths
from rackcert.core.stage_records import BenchRecord, ValidateRecord
from rackcert.metrics.families import Family, exposition, validate_families
from rackcert.metrics.record_metrics import (
    bench_run_families,
    drift_since_certified,
    validate_inputs,
)

MAX_RACKS = 1000  # rack directories looked at per scrape; more is not a rack's history


def _newest(paths: list[Path], stage: str, unreadable: list[Path]):
    for path in reversed(paths):
        if not (path / f"{stage}.json").is_file():
            continue
        try:
            run = RunDir.open(path)
            record = run.read_record(stage)
        except Exception:  # noqa: BLE001 - a planted or broken run must not hide the others
            unreadable.append(path)
            continue
        if record is not None:
            return run, record
    return None


_CACHE: dict[Path, tuple[tuple[Any, ...], bytes]] = {}  # root -> (signature, body)
_CACHE_LOCK = threading.Lock()
_SIGNED = ("meta.json", "validate.json", "bench.json", "report.json", "facts.json")


def _signature(paths: list[Path]) -> tuple[Any, ...]:
    """What changes when a record /metrics reads changes: names, sizes and times (stat
    only; nothing is read), so that an unchanged runs directory is not parsed again on
    every scrape (a 256-node rack's records take a second to read and compare)."""
    out = []
    for path in paths:
        for name in _SIGNED:
            try:
                info = os.stat(path / name)
            except OSError:
                continue
            out.append((str(path), name, info.st_mtime_ns, info.st_size, info.st_ino))
    return tuple(out)


def runs_exposition(root: Path) -> bytes:
    """The metric families of the latest validate and bench run of every rack (the last
    body again while no record under `root` changed)."""
    paths = run_paths(root)
    signature = _signature(paths)
    with _CACHE_LOCK:
        cached = _CACHE.get(root)
    if cached is not None and cached[0] == signature:
        return cached[1]
    body = _build(root, paths)
    with _CACHE_LOCK:
        _CACHE[root] = (signature, body)
    return body


def _build(root: Path, paths_all: list[Path]) -> bytes:
    families: list[Family] = []
    unreadable: list[Path] = []
    by_rack: dict[str, list[Path]] = {}
    for path in paths_all:
        by_rack.setdefault(path.parent.name, []).append(path)
    for rack in sorted(by_rack)[:MAX_RACKS]:
        paths = by_rack[rack]
        found = _newest(paths, "validate", unreadable)
        if found is not None and isinstance(found[1], ValidateRecord):
            run, record = found
            gpus, drift, certified = validate_inputs(run, root, record)
            families += validate_families(
                record, record.rack, gpus=gpus, drift=drift, certified=certified
            )
        found = _newest(paths, "bench", unreadable)
        if found is not None and isinstance(found[1], BenchRecord):
            run, bench = found
            figures_drift = drift_since_certified(run, root, "bench")
            families += bench_run_families(bench, figures_drift)
    bad = Family("metrics_unreadable_runs", "Run directories /metrics could not read", ("spec",))
    for rack in sorted(by_rack)[:MAX_RACKS]:
        bad.set(float(sum(1 for p in unreadable if p.parent.name == rack)), spec=rack)
    return exposition(_merged(families) + [bad])


def _merged(families: list[Family]) -> list[Family]:
    """Families of the same name from several racks, as one family each."""
    out: dict[str, Family] = {}
    for f in families:
        have = out.get(f.name)
        if have is None:
            out[f.name] = f
        elif have.labels == f.labels:
            for key, value in f.samples.items():
                have.samples[key] = max(value, have.samples.get(key, value))
    return list(out.values())
