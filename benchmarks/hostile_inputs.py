"""What hostile run contents cost: the report of a long node value, serve's index over a huge file.

Figures of the hardening issue (round two), before and after: run it once more with the
older code on PYTHONPATH. Each prints wall and CPU seconds (CPU time of this process and its
children: a shared, loaded machine inflates wall time, not CPU time).

- `pdf`: `build_report` (json, html, pdf) of a run of the seed's R750xa rack whose GPU name
  on one node (in facts.json and the gpu.model check) is N characters of unbroken text, N
  from --lengths;
- `serve`: serve's index page (what one browser load of `/` costs) over a runs root whose
  one run holds a sparse artifact of --sparse-gb GB (no disk used; created in a temporary
  directory under /tmp and removed afterwards), first load and second;
- `redact`: the redactor over a record of --strings strings (~47 MB of JSON for 800,000).

    python benchmarks/hostile_inputs.py pdf --lengths 2000 10000
    python benchmarks/hostile_inputs.py serve --sparse-gb 20
    python benchmarks/hostile_inputs.py redact
    PYTHONPATH=<an older checkout> python benchmarks/hostile_inputs.py ...   # the "before"
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# This checkout, after PYTHONPATH (another checkout given there is measured instead) and
# before site-packages (an installed rackcert).
_GIVEN = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
sys.path.insert(1 + len(_GIVEN), str(ROOT))


STATES = ("intact", "changed", "none", "unchecked")


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (the PDF child): what a loaded
    machine does not inflate the way it inflates wall time."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _gpu_name(length: int) -> str:
    return ("NVIDIA-A100-" * (length // 12 + 1))[:length]


def pdf(lengths: list[int]) -> None:
    from rackcert.core.runs import read_json
    from rackcert.report.build import build_report
    from tests.support.plugins.report import facts, write_run

    print("chars  wall s  cpu s  pdf written  note")
    for n in lengths:
        with tempfile.TemporaryDirectory(prefix="rackcert-bench-") as tmp:
            name = _gpu_name(n)
            gpus = facts("470.82.01")["nodes"]["mn-node1"]["gpus"]
            gpus[0]["name"] = name
            run = write_run(
                Path(tmp) / "runs",
                fail={"gpu.model@mn-node1": name},
                extra_facts={"mn-node1": {"gpus": gpus}},
            )
            t0, c0 = time.monotonic(), _cpu_seconds()
            try:
                build_report(run)
                note = ""
            except Exception as exc:  # noqa: BLE001 - the figure is the point; say what ended it
                note = f"{type(exc).__name__}: {str(exc)[:100]}"
            seconds, cpu = time.monotonic() - t0, _cpu_seconds() - c0
            report = read_json(run.path / "report.json")
            note = note or (report.get("error") or "")
            written = (run.path / "report.pdf").is_file()
            print(
                f"{n:5d}  {seconds:6.1f}  {cpu:5.1f}  {str(written):11}  {note[:100]}", flush=True
            )


def serve(sparse_gb: float) -> None:
    from rackcert.report.build import build_report
    from rackcert.serve import index_page
    from tests.support.plugins.report import write_run

    with tempfile.TemporaryDirectory(prefix="rackcert-bench-", dir="/tmp") as tmp:
        root = Path(tmp) / "runs"
        run = write_run(root)
        big = run.path / "artifacts" / "validate" / "core.dump"
        big.parent.mkdir(parents=True, exist_ok=True)
        with big.open("wb") as handle:
            handle.truncate(int(sparse_gb * (1 << 30)))
        build_report(run, formats=("json",))
        try:
            for label in ("first", "second"):
                t0, c0 = time.monotonic(), _cpu_seconds()
                page = index_page(root)
                state = next((s for s in STATES if f'class="m-{s}"' in page), "?")
                print(
                    f"index {label}: {time.monotonic() - t0:.2f} s wall,"
                    f" {_cpu_seconds() - c0:.2f} s cpu (manifest column: {state})",
                    flush=True,
                )
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def redact(strings: int) -> None:
    """What masking costs over a big record: the redactor over `strings` short strings."""
    import json

    from rackcert.core.secrets import Redactor

    redactor = Redactor()
    redactor.add("correct-horse-battery")
    redactor.add("another-s3cret&<>")
    rows = [
        {"id": f"check.{i}", "observed": "x" * 100, "reason": "saw y" * 10, "fix": "do z" * 5}
        for i in range(strings // 4)
    ]
    size = len(json.dumps({"results": rows})) / 1e6
    t0, c0 = time.monotonic(), _cpu_seconds()
    redactor.scrub({"results": rows})
    print(
        f"scrub of {strings} strings ({size:.1f} MB as JSON): {time.monotonic() - t0:.1f} s wall,"
        f" {_cpu_seconds() - c0:.1f} s cpu"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("pdf")
    p.add_argument("--lengths", type=int, nargs="+", default=[2000, 10000])
    s = sub.add_parser("serve")
    s.add_argument("--sparse-gb", type=float, default=20.0)
    r = sub.add_parser("redact")
    r.add_argument("--strings", type=int, default=800_000)
    args = parser.parse_args()
    if args.what == "pdf":
        pdf(args.lengths)
    elif args.what == "redact":
        redact(args.strings)
    else:
        serve(args.sparse_gb)


if __name__ == "__main__":
    main()
