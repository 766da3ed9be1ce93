"""The bench worker as a wheel of its own, built here, installed on every node.

Why: on a real rack the nodes have no rackcert checkout and no controller virtualenv;
`rackcert configure` ships this wheel and the dl_runtime role installs it (pip,
`--no-index --no-deps`: air-gapped nodes) into the nodes' deep-learning environment,
where torch already is. The worker (validation.bench.node) needs only torch and the
standard library, so the wheel holds
exactly those modules and is built with the standard library (no build backend, no
network): a zip with the dist-info files of the wheel format (PEP 427, PEP 376 RECORD).

    path = build_worker_wheel(Path("/tmp/out"))  # rackcert_bench_worker-0.1.0+g<sha>-...whl
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

from rackcert.core.paths import REPO_ROOT

NAME = "rackcert_bench_worker"
VERSION = "0.1.0"
# validation.bench.node's worker and what it imports: torch and the standard library. The
# import-linter contract `bench-node` (pyproject.toml) keeps node/ from reaching further.
MODULES = (
    "validation/__init__.py",
    "validation/bench/__init__.py",
    "validation/bench/node/__init__.py",
    "validation/bench/node/worker.py",
    "validation/bench/node/declare.py",
    "validation/bench/node/comm.py",
    "validation/bench/node/allreduce_loop.py",
    "validation/bench/node/resnet_loop.py",
    "validation/bench/node/tasks.py",
    "validation/bench/node/allreduce_task.py",
    "validation/bench/node/resnet_task.py",
    "validation/bench/node/environment.py",
    "validation/bench/node/compilecache.py",
    "validation/bench/node/storage.py",
)


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def wheel_name(version: str = VERSION) -> str:
    return f"{NAME}-{version}-py3-none-any.whl"


def build_worker_wheel(out_dir: Path, *, root: Path = REPO_ROOT) -> Path:
    """Write the worker wheel into out_dir (created) and return its path. Deterministic:
    fixed timestamps, sorted entries, so the same sources give the same bytes. The version
    carries a digest of the sources (`0.1.0+g<sha>`), so changed code is a new version
    that pip installs over the old, and the same code installs once."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files: list[tuple[str, bytes]] = [(m, (root / m).read_bytes()) for m in MODULES]
    digest = hashlib.sha256(b"".join(d + n.encode() for n, d in files)).hexdigest()[:12]
    version = f"{VERSION}+g{digest}"
    dist_info = f"{NAME}-{version}.dist-info"
    files.append(
        (
            f"{dist_info}/METADATA",
            (
                "Metadata-Version: 2.1\n"
                f"Name: {NAME.replace('_', '-')}\n"
                f"Version: {version}\n"
                "Summary: rackcert's bench worker (allreduce sweep, ResNet50, storage reads)\n"
                "Requires-Python: >=3.9\n"
            ).encode(),
        )
    )
    files.append(
        (
            f"{dist_info}/WHEEL",
            b"Wheel-Version: 1.0\nGenerator: rackcert\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
    )
    record = "".join(f"{name},{_digest(data)},{len(data)}\n" for name, data in files)
    record += f"{dist_info}/RECORD,,\n"
    files.append((f"{dist_info}/RECORD", record.encode()))
    path = out_dir / wheel_name(version)
    tmp = path.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            zf.writestr(info, data, zipfile.ZIP_DEFLATED)
    tmp.replace(path)
    return path
