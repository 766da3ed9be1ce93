"""Write metrics for node_exporter's textfile collector: a temp file, then a rename.

Why: node_exporter reads every `*.prom` file of its `--collector.textfile.directory` on
each scrape; a file caught half-written would be a parse error (and the whole collector
fails for that scrape). Its documentation says to write elsewhere in the same directory
and rename into place. The temp name starts with a dot and does not end in `.prom`, so
the collector never reads it; the file is made world-readable before the rename because
Debian's node_exporter runs as the `prometheus` user while rackcert runs as root.

    write_textfile(Path("/var/lib/prometheus/node-exporter/rackcert.prom"), families)
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from rackcert.core.errors import InputError
from rackcert.metrics.families import Family, exposition

SUFFIX = ".prom"  # the only files node_exporter's textfile collector reads


def check_target(path: Path) -> None:
    """Refuse a --metrics-textfile the collector would never read, before any work."""
    if path.suffix != SUFFIX:
        raise InputError(
            f"--metrics-textfile {path}: node_exporter's textfile collector reads only"
            f" *{SUFFIX} files; name it e.g. rackcert.prom"
        )
    if not path.parent.is_dir():
        raise InputError(f"--metrics-textfile {path}: directory {path.parent} does not exist")
    if path.is_dir():
        raise InputError(f"--metrics-textfile {path}: is a directory")


def write_textfile(path: Path, families: Iterable[Family]) -> int:
    """Write the families to `path` atomically; returns the bytes written."""
    body = exposition(families)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise InputError(f"--metrics-textfile {path}: cannot write: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(body)
            handle.flush()
            os.fchmod(handle.fileno(), 0o644)
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise InputError(f"--metrics-textfile {path}: cannot write: {exc.strerror}") from None
    return len(body)
