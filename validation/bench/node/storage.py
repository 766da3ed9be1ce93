"""Parallel random-read benchmark of the training-data mount.

GPU servers feeding a training job open many read threads against the filer (the seed's
PowerScale sizing speaks of thousands), each reading records at random offsets. This
does the same with threads doing `os.pread` of a fixed block at random offsets of random
files for a fixed time, and reports throughput, IOPS and latency percentiles.

Small synthetic files are created only when the directory has no readable files and the
caller allows it (the spec's `storage.nfs.create_synthetic_data`). The page cache would
make a re-read look like memory bandwidth; `posix_fadvise(DONTNEED)` asks the kernel to
drop each file first (honoured by local file systems and the Linux NFS client), and the
result says whether the data was synthetic.

Engine: fio (Debian's fio, `--output-format=json`) when it is installed, the tool storage
vendors quote; this module's own `pread` readers otherwise, or when fio fails (the
result says which ran and why). Both read the same files with the same block size,
reader count and duration.

Runs alone, without torch: `python -m validation.bench.node.storage DIR [--synthetic] [--quick]`
prints one `RACKCERT_RESULT <json>` line (how the launcher reads it back over SSH).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

MARKER = "RACKCERT_RESULT "  # what the launcher looks for, as the bench worker prints it


@dataclass(frozen=True)
class StorageConfig:
    readers: int = 64
    block_bytes: int = 1 << 20
    duration_s: float = 5.0
    synthetic_files: int = 64
    synthetic_file_bytes: int = 16 << 20
    max_files: int = 10000

    @classmethod
    def quick(cls) -> StorageConfig:
        return cls(
            readers=8,
            block_bytes=64 << 10,
            duration_s=0.5,
            synthetic_files=8,
            synthetic_file_bytes=1 << 20,
        )


def data_files(root: Path, limit: int) -> list[tuple[Path, int]]:
    """Up to `limit` regular, non-empty files under root, with their sizes."""
    found: list[tuple[Path, int]] = []
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            try:
                size = path.stat().st_size
            except OSError:
                continue
            if size > 0 and path.is_file() and os.access(path, os.R_OK):
                found.append((path, size))
                if len(found) >= limit:
                    return found
    return found


def make_synthetic(root: Path, count: int, size: int) -> list[tuple[Path, int]]:
    """`count` files of `size` bytes of random data under root/rackcert-synthetic/."""
    target = root / "rackcert-synthetic"
    target.mkdir(parents=True, exist_ok=True)
    block = os.urandom(min(size, 4 << 20))
    out = []
    for i in range(count):
        path = target / f"shard-{i:05d}.bin"
        with open(path, "wb") as handle:
            left = size
            while left > 0:
                handle.write(block[: min(left, len(block))])
                left -= len(block)
            handle.flush()
            os.fsync(handle.fileno())
        out.append((path, size))
    return out


def prepare(root: Path, cfg: StorageConfig, *, allow_synthetic: bool) -> dict[str, Any]:
    """Make sure root holds files to read (creating synthetic ones if allowed and needed)."""
    if not root.is_dir():
        raise FileNotFoundError(f"data directory {root} does not exist")
    files = data_files(root, cfg.max_files)
    created = False
    if not files:
        if not allow_synthetic:
            raise ValueError(
                f"{root} holds no readable files and the spec does not allow synthetic data"
                " (storage.nfs.create_synthetic_data)"
            )
        files = make_synthetic(root, cfg.synthetic_files, cfg.synthetic_file_bytes)
        created = True
    return {"path": str(root), "files": len(files), "synthetic_created": created}


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list (q in 0..100)."""
    if not sorted_values:
        return 0.0
    rank = max(1, min(len(sorted_values), math.ceil(q / 100 * len(sorted_values))))
    return sorted_values[rank - 1]


def _drop_cache(files: list[tuple[Path, int]]) -> bool:
    if not hasattr(os, "posix_fadvise"):
        return False
    for path, _size in files:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return True


def _reader(
    files: list[tuple[int, int]], cfg: StorageConfig, stop: float, seed: int, out: list[Any]
) -> None:
    rng = random.Random(seed)
    latencies: list[float] = []
    nbytes = errors = 0
    while time.perf_counter() < stop:
        fd, size = files[rng.randrange(len(files))]
        block = min(cfg.block_bytes, size)
        offset = rng.randrange(0, size - block + 1)
        t0 = time.perf_counter()
        try:
            got = len(os.pread(fd, block, offset))
        except OSError:
            errors += 1
            continue
        latencies.append(time.perf_counter() - t0)
        nbytes += got
    out.append((latencies, nbytes, errors))


ENGINES = ("auto", "fio", "pread")


def fio_command(fio: str, root: Path, cfg: StorageConfig) -> list[str]:
    """fio reading every file under root at random 1-block offsets, `readers` jobs, timed."""
    return [
        fio,
        "--name=rackcert-randread",
        f"--opendir={root}",
        "--readonly",
        "--rw=randread",
        f"--bs={cfg.block_bytes}",
        f"--numjobs={cfg.readers}",
        "--time_based",
        f"--runtime={max(1, round(cfg.duration_s * 1000))}ms",
        "--ioengine=psync",
        "--invalidate=1",  # drop the page cache of the files first, as the pread path asks
        "--group_reporting",
        "--output-format=json",
    ]


def parse_fio(text: str) -> dict[str, Any]:
    """fio's JSON report (after any lines fio prints before it) -> this module's figures.

    Uses the first job (group reporting sums the jobs): read bw_bytes, iops, total_ios,
    clat_ns percentiles and max, the job's error; fio's runtime is in milliseconds.
    """
    start = text.find("{")
    if start < 0:
        raise ValueError("fio printed no JSON report")
    report = json.loads(text[start:])
    job = report["jobs"][0]
    read = job["read"]
    pct = read.get("clat_ns", {}).get("percentile", {})

    def ms(q: str) -> float:
        return float(pct.get(q, 0.0)) / 1e6

    # job_runtime sums the jobs under group reporting; bytes / bandwidth is the wall time.
    bw = float(read["bw_bytes"])
    seconds = int(read["io_bytes"]) / bw if bw > 0 else 0.0
    return {
        "engine": report.get("fio version", "fio"),
        "duration_s": seconds,
        "reads": int(read["total_ios"]),
        "errors": int(job.get("error", 0)),
        "bytes_read": int(read["io_bytes"]),
        "throughput_mb_s": float(read["bw_bytes"]) / 1e6,
        "iops": float(read["iops"]),
        "latency_ms": {
            "p50": ms("50.000000"),
            "p90": ms("90.000000"),
            "p99": ms("99.000000"),
            "p99.9": ms("99.900000"),
            "max": float(read.get("clat_ns", {}).get("max", 0.0)) / 1e6,
        },
    }


def run_fio(fio: str, root: Path, cfg: StorageConfig) -> dict[str, Any]:
    """Run fio over root; raises ValueError with fio's last line when it gives no report."""
    argv = fio_command(fio, root, cfg)
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=cfg.duration_s + 120, check=False
    )
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ValueError(f"fio exit {proc.returncode}: {last[0][:200]}")
    return parse_fio(proc.stdout)


def run(
    root: Path | str, cfg: StorageConfig, *, allow_synthetic: bool, engine: str = "auto"
) -> dict[str, Any]:
    """Prepare the files, then read them with fio (when installed) or the pread readers."""
    if engine not in ENGINES:
        raise ValueError(f"storage engine {engine!r}: choose one of {', '.join(ENGINES)}")
    fio = shutil.which("fio") if engine in ("auto", "fio") else None
    if engine == "fio" and fio is None:
        raise ValueError("storage engine fio: fio is not installed")
    if fio is None:
        return {**run_pread(root, cfg, allow_synthetic=allow_synthetic), "engine": "pread"}
    root = Path(root)
    files, synthetic = _files(root, cfg, allow_synthetic)
    base = {
        "path": str(root),
        "synthetic": synthetic,
        "files": len(files),
        "bytes_in_files": sum(s for _p, s in files),
        "cache_drop_requested": True,
        "readers": cfg.readers,
        "block_bytes": cfg.block_bytes,
    }
    try:
        return {**base, **run_fio(fio, root, cfg)}
    except (ValueError, KeyError, IndexError, subprocess.TimeoutExpired) as exc:
        if engine == "fio":
            raise ValueError(f"storage engine fio: {exc}") from None
        result = run_pread(root, cfg, allow_synthetic=allow_synthetic)
        return {**result, "engine": "pread", "fio_error": str(exc)[:300]}


def _files(
    root: Path, cfg: StorageConfig, allow_synthetic: bool
) -> tuple[list[tuple[Path, int]], bool]:
    created = prepare(root, cfg, allow_synthetic=allow_synthetic)["synthetic_created"]
    files = data_files(root, cfg.max_files)
    return files, created or any(p.parent.name == "rackcert-synthetic" for p, _s in files)


def run_pread(root: Path | str, cfg: StorageConfig, *, allow_synthetic: bool) -> dict[str, Any]:
    """This module's own readers: `readers` threads of random `pread`s for `duration_s`.

    Raises FileNotFoundError/ValueError when it cannot."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"data directory {root} does not exist")
    synthetic = prepare(root, cfg, allow_synthetic=allow_synthetic)["synthetic_created"]
    files = data_files(root, cfg.max_files)
    synthetic = synthetic or any(p.parent.name == "rackcert-synthetic" for p, _s in files)
    dropped = _drop_cache(files)
    fds = [(os.open(p, os.O_RDONLY), size) for p, size in files]
    results: list[Any] = []
    try:
        start = time.perf_counter()
        stop = start + cfg.duration_s
        threads = [
            threading.Thread(target=_reader, args=(fds, cfg, stop, i, results), daemon=True)
            for i in range(cfg.readers)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - start
    finally:
        for fd, _size in fds:
            os.close(fd)
    lat = sorted(x for r in results for x in r[0])
    total = sum(r[1] for r in results)
    return {
        "path": str(root),
        "synthetic": synthetic,
        "files": len(files),
        "bytes_in_files": sum(s for _p, s in files),
        "cache_drop_requested": dropped,
        "readers": cfg.readers,
        "block_bytes": cfg.block_bytes,
        "duration_s": elapsed,
        "reads": len(lat),
        "errors": sum(r[2] for r in results),
        "bytes_read": total,
        "throughput_mb_s": total / elapsed / 1e6 if elapsed > 0 else 0.0,
        "iops": len(lat) / elapsed if elapsed > 0 else 0.0,
        "latency_ms": {f"p{q:g}": percentile(lat, q) * 1e3 for q in (50, 90, 99, 99.9)}
        | {"max": (lat[-1] * 1e3 if lat else 0.0)},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Parallel random-read benchmark of a directory")
    parser.add_argument("root")
    parser.add_argument("--readers", type=int)
    parser.add_argument("--block-bytes", type=int)
    parser.add_argument("--duration", type=float)
    parser.add_argument("--synthetic", action="store_true", help="create files if there are none")
    parser.add_argument("--quick", action="store_true", help="few readers, half a second")
    parser.add_argument("--prepare", action="store_true", help="only create synthetic files")
    parser.add_argument("--engine", choices=ENGINES, default="auto", help="fio, pread or auto")
    args = parser.parse_args(argv)
    cfg = StorageConfig.quick() if args.quick else StorageConfig()
    cfg = replace(
        cfg,
        readers=args.readers or cfg.readers,
        block_bytes=args.block_bytes or cfg.block_bytes,
        duration_s=args.duration or cfg.duration_s,
    )
    try:
        if args.prepare:
            result = prepare(Path(args.root), cfg, allow_synthetic=args.synthetic)
        else:
            result = run(args.root, cfg, allow_synthetic=args.synthetic, engine=args.engine)
    except (OSError, ValueError) as exc:
        print(f"storage benchmark: {exc}", file=sys.stderr)
        return 2
    print(MARKER + json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
