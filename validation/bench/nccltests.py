"""NVIDIA's nccl-tests `all_reduce_perf` as the allreduce engine where it is installed.

Why: nccl-tests is the figure NVIDIA and every cloud's health check quote (busbw at
large sizes), measured by NCCL's own benchmark rather than through a framework. Where
the binary is given, on PATH or installed by configure's nccl_tests role, rackcert runs
it and parses its table; the torch sweep (validation.bench.allreduce) stays the fallback
and, when both ran, the report shows them side by side; bench.json names the binary that
ran (`binary`, `found_by`). Parser tested on a real run's output (one H200,
tests/fixtures/bench/all_reduce_perf-h200-1gpu.txt).

Table columns (nccl-tests src/common.cu): size (B), count (elements), type, redop, root,
then out-of-place time (us), algbw (GB/s), busbw (GB/s), #wrong, and the same four
in-place. The "#wrong" column is "N/A" when validation is off (-c 0).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

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

    Raises NcclTestsParseError (with the output's last line) when it printed no table.
    """
    argv = command(binary, gpus, max_bytes)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LD_LIBRARY_PATH", "HOME")
           or k.startswith(("NCCL_", "CUDA_"))}  # fmt: skip
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout_s, env=env, check=False
    )
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"$ {' '.join(argv)}\n{proc.stdout}{proc.stderr}")
    try:
        report = parse(proc.stdout)
    except NcclTestsParseError:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise NcclTestsParseError(
            f"{BINARY} exit {proc.returncode}, no table: {last[0][:200]}; log: {log}"
        ) from None
    return {**report, "command": argv, "returncode": proc.returncode, "log": str(log),
            "world_size": gpus}  # fmt: skip


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
