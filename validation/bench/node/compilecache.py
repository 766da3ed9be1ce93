"""The node's compile cache: inductor's FX graph and AOTAutograd caches and Triton's kernels.

Why: torch.compile of ResNet50 costs a minute or more per rank when nothing is cached, and
a re-certification after an upgrade would pay it at every point of every run. PyTorch
keeps what it compiled in TORCHINDUCTOR_CACHE_DIR (FX graph cache, AOTAutograd cache,
autotuning results) and Triton its kernels in TRITON_CACHE_DIR; both default to /tmp,
which a reboot empties. rackcert points them at one directory under the nodes' DL
environment (guest.dl_venv), kept between runs, so the first run compiles and later ones
load. The cache keys carry the torch, Triton and CUDA versions, so an upgrade compiles
again once, then loads. A directory the operator named in the environment wins.

Worker side: the standard library only (runs before torch is imported).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

# Below the environment's prefix (sys.prefix, guest.dl_venv): var/cache as the FHS has it.
SUBDIR = "var/cache/rackcert/compile"


def default_dir(prefix: str) -> str:
    """The cache directory under a Python environment's prefix (a venv's root)."""
    return f"{prefix.rstrip('/')}/{SUBDIR}"


def count_files(path: Path) -> int:
    """Files under `path` (how warm the cache is when a launch starts)."""
    return sum(len(files) for _root, _dirs, files in os.walk(path))


def use(directory: str | None) -> dict[str, Any] | None:
    """Point inductor's and Triton's caches at `directory` (created) unless the environment
    already names one; returns what the record says about it, or None when no cache is
    asked for. A directory that cannot be made is said, not fatal: the run compiles
    as it would have without it."""
    named = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if not directory and not named:
        return None
    path = Path(named or directory or "").expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return {"dir": str(path), "error": f"{type(exc).__name__}: {exc}", "files_before": 0}
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(path)
    os.environ.setdefault("TRITON_CACHE_DIR", str(path / "triton"))
    # Both on by default in torch 2.4+; said here so an older default cannot turn them off.
    os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "1")
    os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "1")
    return {
        "dir": str(path),
        "from": "environment" if named else "rackcert",
        "files_before": count_files(path),
    }
