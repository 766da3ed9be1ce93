"""NVIDIA's nccl-tests `all_reduce_perf` as the allreduce engine where it is installed.

Why: nccl-tests is the figure NVIDIA and every cloud's health check quote (busbw at
large sizes), measured by NCCL's own benchmark rather than through a framework. Where
the binary is given, on PATH or installed by configure's nccl_tests role, rackcert runs
it and parses its table; the torch sweep (validation.bench.node.allreduce_loop) stays the fallback
and, when both ran, the report shows them side by side; bench.json names the binary that
ran (`binary`, `found_by`). Parser tested on a real run's output (one H200,
tests/support/fixtures/bench/all_reduce_perf-h200-1gpu.txt).

Two forms of the same report. Where the binary has `-J FILE` (JSON output, nccl-tests'
`--output_file`, in its `-h` since the 2.17 series) rackcert asks for it and reads that:
no column widths, no "%g" surprises. Otherwise the text table. Both parsers give the
same dict, tested on real output of one H200 run that wrote both
(tests/support/fixtures/bench/all_reduce_perf-h200-1gpu-json.*).

Table columns (nccl-tests src/common.cu): size (B), count (elements), type, redop, root,
then out-of-place time (us), algbw (GB/s), busbw (GB/s), #wrong, and the same four
in-place. The "#wrong" column is "N/A" when validation is off (-c 0). JSON (src/util.cu,
file version 3): `results[]` of {size, count, type, redop, root, out_of_place{time,
alg_bw, bus_bw, nwrong}, in_place{...}}, `average_bus_bandwidth.bandwidth`,
`out_of_bounds.count`, `config.devices[]`, `errors[]`; booleans are the strings
"true"/"false" and a NaN is the string "nan". Its `env` key holds the process's whole
environment: rackcert never records it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from rackcert.core.runs import RunDir
from rackcert.core.stage_records import Model
from validation.bench.node.declare import Opt
from validation.bench.options import BenchOptions, Engine, Point
from validation.bench.units.base import BenchUnit, Context

# -- its part of bench.json (registered with the spine's BenchData: BenchUnit.parts) ----


class NcclTestsSide(Model):
    """One side (out-of-place or in-place) of an all_reduce_perf row."""

    time_us: float | None = None
    algbw_gbps: float | None = None
    busbw_gbps: float | None = None
    wrong: int | None = Field(None, description="Wrong elements (-c 1); None: not checked")


class NcclTestsPoint(NcclTestsSide):
    """One size of all_reduce_perf: the out-of-place figures, the in-place under in_place."""

    size_bytes: int
    count: int
    type: str | None = None
    redop: str | None = None
    in_place: NcclTestsSide | None = None


class NcclTestsDevice(Model):
    rank: int | None = None
    device: int | None = None
    bus: str | None = None
    name: str | None = None


class NcclTestsResult(Model):
    """nccl-tests' all_reduce_perf (validation.bench.units.nccl_tests): its table parsed from
    its JSON (`-J`) or text output, the command, and which binary ran; or why it did not."""

    # Optional with no value, so a record holds the keys its run wrote and no more.
    skipped: bool | None = None
    reason: str | None = Field(None, description="Why it was skipped (or why it failed)")
    failed: bool | None = Field(None, description="It ran and gave no table")
    binary: str | None = None
    found_by: str | None = Field(None, description="--nccl-tests, PATH or configure's role")
    format: Literal["json", "text"] | None = None
    json_version: str | int | None = None
    json_error: str | None = Field(None, description="Why the JSON was not read (text was)")
    version: str | None = Field(None, description="nccl-tests' own version")
    nccl_library: int | None = None
    devices: list[NcclTestsDevice] | None = None
    avg_busbw_gbps: float | None = None
    out_of_bounds: int | None = None
    errors: list[Any] | None = None
    points: list[NcclTestsPoint] | None = None
    unparsed_rows: int | None = None
    correct: bool | None = None
    command: list[str] | None = None
    returncode: int | None = None
    log: str | None = None
    world_size: int | None = None


class SideBySide(Model):
    """nccl-tests and the torch sweep at one size both measured."""

    size_bytes: int
    nccl_tests_algbw_gbps: float | None = None
    nccl_tests_busbw_gbps: float | None = None
    sweep_algbw_gbps: float | None = None
    sweep_busbw_gbps: float | None = None


BINARY = "all_reduce_perf"
# nccl-tests prints a figure that outgrows its column in %g form: "2e+06" (seen on an H200).
_NUM = r"([\d.]+(?:[eE][+-]?\d+)?)"
_ROW = re.compile(
    r"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)"
    rf"\s+{_NUM}\s+{_NUM}\s+{_NUM}\s+(\S+)"
    rf"\s+{_NUM}\s+{_NUM}\s+{_NUM}\s+(\S+)\s*$"
)
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([\d.]+)")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(\w*)")
_VERSION = re.compile(
    r"^#\s*nccl-tests version (\S+)(?: nccl-headers=(\d+))?(?: nccl-library=(\d+))?"
)
_DEVICE = re.compile(r"^#\s+Rank\s+(\d+)\s.*?device\s+(\d+)\s+\[([^\]]+)\]\s+(.+?)\s*$")


class NcclTestsParseError(ValueError):
    """The text is not an all_reduce_perf report (no table rows)."""


def _wrong(text: str) -> int | None:
    return None if text == "N/A" else int(text)


def parse(text: str) -> dict[str, Any]:
    """all_reduce_perf's stdout -> {version, devices, points, avg_busbw_gbps, ...}.

    Each point carries the out-of-place figures (the ones nccl-tests' summary averages and
    NVIDIA's tables quote) and the in-place ones under `in_place`.
    """
    points: list[dict[str, Any]] = []
    out: dict[str, Any] = {"version": None, "devices": [], "avg_busbw_gbps": None}
    unparsed = 0
    for line in text.splitlines():
        if re.match(r"^\s*\d+\s+\d+\s", line) and not _ROW.match(line):
            unparsed += 1  # a table row this parser does not read: said, never dropped silently
        if m := _ROW.match(line):
            size, count = int(m.group(1)), int(m.group(2))
            points.append(
                {
                    "size_bytes": size,
                    "count": count,
                    "type": m.group(3),
                    "redop": m.group(4),
                    "time_us": float(m.group(6)),
                    "algbw_gbps": float(m.group(7)),
                    "busbw_gbps": float(m.group(8)),
                    "wrong": _wrong(m.group(9)),
                    "in_place": {
                        "time_us": float(m.group(10)),
                        "algbw_gbps": float(m.group(11)),
                        "busbw_gbps": float(m.group(12)),
                        "wrong": _wrong(m.group(13)),
                    },
                }
            )
        elif m := _AVG.match(line):
            out["avg_busbw_gbps"] = float(m.group(1))
        elif m := _OOB.match(line):
            out["out_of_bounds"] = int(m.group(1))
        elif m := _VERSION.match(line):
            out["version"] = m.group(1)
            out["nccl_library"] = int(m.group(3)) if m.group(3) else None
        elif m := _DEVICE.match(line):
            out["devices"].append(
                {"rank": int(m.group(1)), "device": int(m.group(2)), "bus": m.group(3),
                 "name": m.group(4)}
            )  # fmt: skip
    if not points:
        raise NcclTestsParseError("no all_reduce_perf table rows in the output")
    out["points"] = points
    out["unparsed_rows"] = unparsed
    out["correct"] = unparsed == 0 and all(
        p["wrong"] in (0, None) and p["in_place"]["wrong"] in (0, None) for p in points
    )
    return out


def _num(value: Any) -> float:
    """A JSON figure: nccl-tests writes NaN as the string "nan"."""
    return float(value) if value is not None else float("nan")


def _json_wrong(value: Any) -> int | None:
    return None if value is None else int(float(value))


def _side(row: dict[str, Any], key: str) -> dict[str, Any]:
    side = row.get(key) or {}
    return {
        "time_us": _num(side.get("time", side.get("cpu_time"))),
        "algbw_gbps": _num(side.get("alg_bw")),
        "busbw_gbps": _num(side.get("bus_bw")),
        "wrong": _json_wrong(side.get("nwrong")),
    }


def parse_json(doc: dict[str, Any], text: str = "") -> dict[str, Any]:
    """all_reduce_perf's `-J` file (already loaded) -> the same dict as `parse`.

    The version line is only in the text (the JSON has NCCL's, not nccl-tests' own), so
    `text` (its stdout), when given, fills `version`.
    """
    rows = doc.get("results")
    if not isinstance(rows, list) or not rows:
        raise NcclTestsParseError("no results in the nccl-tests JSON output")
    points = []
    for row in rows:
        out_of_place = _side(row, "out_of_place")
        points.append(
            {
                "size_bytes": int(row["size"]),
                "count": int(row["count"]),
                "type": row.get("type"),
                "redop": row.get("redop"),
                **out_of_place,
                "in_place": _side(row, "in_place"),
            }
        )
    devices = [
        {"rank": d.get("rank"), "device": d.get("device"), "bus": d.get("device_hex"),
         "name": d.get("device_info")}
        for d in (doc.get("config") or {}).get("devices") or []
    ]  # fmt: skip
    version = next((m.group(1) for ln in text.splitlines() if (m := _VERSION.match(ln))), None)
    bounds = doc.get("out_of_bounds") or {}
    avg = doc.get("average_bus_bandwidth") or {}
    return {
        "format": "json",
        "json_version": doc.get("version"),
        "version": version,
        "nccl_library": doc.get("nccl_version"),
        "devices": devices,
        "avg_busbw_gbps": _num(avg["bandwidth"]) if "bandwidth" in avg else None,
        "out_of_bounds": int(bounds["count"]) if "count" in bounds else None,
        "errors": [e for e in doc.get("errors") or [] if e],
        "points": points,
        "unparsed_rows": 0,
        "correct": not bounds.get("count")
        and all(p["wrong"] in (0, None) and p["in_place"]["wrong"] in (0, None) for p in points),
    }


def supports_json(binary: str, timeout_s: float = 30) -> bool:
    """Whether this all_reduce_perf writes JSON (`-J`): its usage text names
    `--output_file`. Asked with `-h`, which prints the usage and exits: an older binary
    given `-J` would print "invalid option" and the usage, and measure nothing."""
    try:
        proc = subprocess.run(
            [binary, "-h"], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--output_file" in proc.stdout + proc.stderr


# Where configure's nccl_tests role installs it: <root>/nccl-tests-<version>/bin, with
# <root>/nccl-tests pointing at the version the spec pins (playbooks/roles/nccl_tests).
INSTALLED = Path("/opt/rackcert/nccl-tests/bin") / BINARY


def _runnable(path: Path | str) -> bool:
    return Path(path).is_file() and os.access(path, os.X_OK)


def locate(explicit: str | None = None, installed: Path = INSTALLED) -> dict[str, str] | None:
    """The all_reduce_perf to run and how it was found, or None where there is none.

    Order: the path given (--nccl-tests; nothing else when it is wrong), the one on PATH
    (the role leaves such a binary alone), then the role's install.
    """
    if explicit:
        return {"binary": explicit, "found_by": "--nccl-tests"} if _runnable(explicit) else None
    on_path = shutil.which(BINARY)
    if on_path:
        return {"binary": on_path, "found_by": "PATH"}
    if _runnable(installed):
        return {"binary": str(installed), "found_by": "configure's nccl_tests role"}
    return None


def command(binary: str, gpus: int, max_bytes: int, min_bytes: int = 8) -> list[str]:
    """One process driving `gpus` local GPUs (-g), sizes doubling min..max, checked (-c 1)."""
    return [binary, "-b", str(min_bytes), "-e", str(max_bytes), "-f", "2", "-g", str(gpus),
            "-c", "1"]  # fmt: skip


def run_local(
    binary: str, gpus: int, max_bytes: int, log: Path, *, timeout_s: float = 900
) -> dict[str, Any]:
    """Run all_reduce_perf here on `gpus` GPUs; the parsed report plus the command and rc.

    JSON (`-J`) when the binary has it, read from a private temporary file; the text
    table otherwise, or when the JSON file is missing or unreadable (`json_error` says
    why). Raises NcclTestsParseError (with the output's last line) when neither form holds
    a table.
    """
    argv = command(binary, gpus, max_bytes)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LD_LIBRARY_PATH", "HOME")
           or k.startswith(("NCCL_", "CUDA_"))}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="rackcert-nccl-tests-") as tmp:
        json_path = Path(tmp) / "all_reduce_perf.json"
        if supports_json(binary):
            argv = [*argv, "-J", str(json_path)]
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, env=env, check=False
        )
        doc, json_error = _read_json(json_path) if "-J" in argv else (None, None)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"$ {' '.join(argv)}\n{proc.stdout}{proc.stderr}")
    try:
        if doc is not None:
            doc.pop("env", None)  # the process's whole environment: never recorded
            log.with_suffix(".json").write_text(json.dumps(doc, indent=1))
            report = parse_json(doc, proc.stdout)
        else:
            report = {**parse(proc.stdout), "format": "text"}
            if json_error:
                report["json_error"] = json_error
    except NcclTestsParseError:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise NcclTestsParseError(
            f"{BINARY} exit {proc.returncode}, no table: {last[0][:200]}; log: {log}"
        ) from None
    return {**report, "command": argv, "returncode": proc.returncode, "log": str(log),
            "world_size": gpus}  # fmt: skip


def _read_json(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return None, f"JSON output unreadable ({type(exc).__name__}); read the text table"
    if not isinstance(doc, dict):
        return None, "JSON output is not an object; read the text table"
    return doc, None


def side_by_side(engine: dict[str, Any], sweep: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of the sizes both measured: nccl-tests' and the torch sweep's busbw and algbw."""
    by_size = {p["size_bytes"]: p for p in sweep}
    rows = []
    for p in engine["points"]:
        other = by_size.get(p["size_bytes"])
        if other is None:
            continue
        rows.append(
            {
                "size_bytes": p["size_bytes"],
                "nccl_tests_algbw_gbps": p["algbw_gbps"],
                "nccl_tests_busbw_gbps": p["busbw_gbps"],
                "sweep_algbw_gbps": other["algbw_gbps"],
                "sweep_busbw_gbps": other["busbw_gbps"],
            }
        )
    return rows


def run_nccl_tests(
    opts: BenchOptions,
    engine: Engine,
    run: RunDir,
    points: list[Point],
    installed: Path = INSTALLED,
) -> dict[str, Any]:
    """all_reduce_perf on this machine's GPUs (local mode), or why it did not run; the
    record names the binary that ran and how it was found (`binary`, `found_by`)."""
    if not opts.local:
        return {
            "skipped": True,
            "reason": "across nodes all_reduce_perf needs an MPI build of nccl-tests and"
            " mpirun; the allreduce figures are the sweep's",
        }
    if engine.device != "cuda":
        return {"skipped": True, "reason": "no GPU here: nccl-tests drives GPUs only"}
    found = locate(opts.nccl_tests, installed)
    if found is None:
        where = opts.nccl_tests or f"{BINARY} on PATH or in {installed.parent}"
        return {"skipped": True, "reason": f"nccl-tests not installed ({where} not found)"}
    gpus = points[-1].gpus
    top = opts.max_bytes or ((64 << 20) if opts.quick else (1 << 30))
    log = run.artifacts("bench") / "nccl-tests.log"
    try:
        report = run_local(found["binary"], gpus, top, log, timeout_s=opts.timeout_s)
    except (NcclTestsParseError, OSError) as exc:
        return {"skipped": True, "reason": str(exc), "failed": True, **found}
    return {**report, **found}


class NcclTestsUnit(BenchUnit):
    """nccl-tests' all_reduce_perf on this machine's GPUs, beside the sweep."""

    name = "nccl_tests"
    parts: ClassVar[dict[str, Any]] = {
        "nccl_tests": NcclTestsResult,
        "allreduce_side_by_side": list[SideBySide],
    }
    skip_word = "allreduce"
    after_launches = True
    help = "nccl-tests all_reduce_perf (local GPUs)"
    options = (
        Opt(
            "nccl_tests",
            "str",
            "all_reduce_perf to run beside the sweep (default: the one on PATH, if any)",
        ),
    )

    def run(self, ctx: Context) -> NcclTestsResult:
        raw = run_nccl_tests(ctx.opts, ctx.engine, ctx.run, ctx.points)
        return NcclTestsResult.model_validate(raw)

    def also(self, ctx: Context, result: NcclTestsResult) -> dict[str, Any]:
        sweep = next((r for _p, r in reversed(ctx.answers) if "allreduce" in r), None)
        if result.skipped or sweep is None:
            return {}
        rows = side_by_side(result.model_dump(), sweep["allreduce"]["points"])
        return {"allreduce_side_by_side": rows}

    def say(self, ctx: Context, result: NcclTestsResult) -> list[str]:
        if result.skipped:
            return []
        return [f"  nccl-tests: avg busbw {result.avg_busbw_gbps} GB/s"]

    def lines(self, data: dict[str, Any]) -> list[str]:
        nt = data.get("nccl_tests") or {}
        if nt and not nt.get("skipped"):
            return [
                f"nccl-tests {nt.get('version')} x{nt['world_size']}: avg busbw"
                f" {nt['avg_busbw_gbps']} GB/s (the sweep's figures beside it in bench.json)"
            ]
        return [f"nccl-tests: not run ({nt['reason']})"] if nt else []
