"""MANIFEST.sha256: tamper evidence over every file of a run directory.

The manifest is written last, after every report file, in `sha256sum` format
(`<hex>  <relative path>`, sorted), so `sha256sum -c MANIFEST.sha256` works too.
`verify` ignores nothing but the manifest itself: a changed byte, an added file
(a stray temp file included) or a removed file each fail it. The manifest's own
digest is printed so an auditor can keep it elsewhere and tell the manifest
itself was not rewritten.

Example:
    write_manifest(run.path)
    result = verify(run.path); result.ok
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from rackcert.core.errors import RecordError
from rackcert.core.runs import atomic_write_bytes, read_capped_bytes

MANIFEST_NAME = "MANIFEST.sha256"
SIGNATURE_NAME = MANIFEST_NAME + ".sig"  # rackcert.report.signing: beside the manifest, not in it
STATEMENT_NAME = MANIFEST_NAME + ".signed"  # what the signature is over (rack, run, digest)
_CHUNK = 1 << 20
MAX_MANIFEST = 16 << 20  # 100,000 files' lines; a bigger manifest is not one


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(f"{path}: no longer a regular file")
        while chunk := handle.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _digest(path: Path) -> str:
    """Content digest of a regular file; a link is hashed as a link (its target's name, never
    the file behind it, which may be a password file); anything else gets a marker digest."""
    mode = path.lstat().st_mode
    if stat.S_ISREG(mode):
        return _sha256(path)
    what = f"link->{os.readlink(path)}" if stat.S_ISLNK(mode) else f"mode {mode:o}"
    return hashlib.sha256(f"rackcert-special:{what}".encode()).hexdigest()


def file_digests(run_path: Path) -> dict[str, str]:
    """{relative posix path: sha256} of every file under run_path except the manifest."""
    out: dict[str, str] = {}
    try:
        for dirpath, dirnames, filenames in os.walk(run_path):
            dirnames.sort()
            base = Path(dirpath)
            for name in filenames + [d for d in dirnames if (base / d).is_symlink()]:
                rel = (base / name).relative_to(run_path).as_posix()
                if rel not in (MANIFEST_NAME, SIGNATURE_NAME, STATEMENT_NAME):
                    out[rel] = _digest(base / name)
    except OSError as exc:
        raise RecordError(f"{run_path}: cannot read for the manifest: {exc}") from None
    return dict(sorted(out.items()))


def _escape(name: str) -> tuple[str, str]:
    """sha256sum's convention: a name with a newline or backslash is escaped, line gets a '\\'."""
    if "\\" in name or "\n" in name or "\r" in name:
        return "\\", name.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return "", name


def _unescape(name: str) -> str:
    out, i = [], 0
    while i < len(name):
        if name[i] == "\\" and i + 1 < len(name):
            out.append({"n": "\n", "r": "\r", "\\": "\\"}.get(name[i + 1], name[i + 1]))
            i += 2
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def render(digests: dict[str, str]) -> bytes:
    lines = []
    for name, digest in sorted(digests.items()):
        prefix, escaped = _escape(name)
        lines.append(f"{prefix}{digest}  {escaped}\n")
    return "".join(lines).encode()


def parse(text: str, source: str = MANIFEST_NAME) -> dict[str, str]:
    out: dict[str, str] = {}
    for number, line in enumerate(text.split("\n"), 1):
        if not line:
            continue
        escaped = line.startswith("\\")
        body = line[1:] if escaped else line
        digest, sep, name = body.partition("  ")
        if not sep or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise RecordError(f"{source}:{number}: not a sha256sum line (digest, two spaces, path)")
        out[_unescape(name) if escaped else name] = digest
    return out


def write_manifest(run_path: Path) -> tuple[Path, str]:
    """Write MANIFEST.sha256 over the run directory now; returns its path and its own sha256."""
    data = render(file_digests(run_path))
    target = run_path / MANIFEST_NAME
    try:
        atomic_write_bytes(target, data)
    except OSError as exc:
        raise RecordError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target, hashlib.sha256(data).hexdigest()


@dataclass
class Verification:
    manifest_sha256: str
    files: int
    changed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.changed or self.added or self.removed)

    def problems(self) -> list[str]:
        return (
            [f"changed: {p}" for p in self.changed]
            + [f"added: {p}" for p in self.added]
            + [f"removed: {p}" for p in self.removed]
        )


def verify(run_path: Path) -> Verification:
    """Compare the run directory with its manifest, byte for byte."""
    path = run_path / MANIFEST_NAME
    if not path.exists() and not path.is_symlink():
        raise RecordError(
            f"{run_path}: no {MANIFEST_NAME}; run `rackcert report {run_path}` to write one"
        )
    data = read_capped_bytes(path, MAX_MANIFEST)  # a planted 1 GB manifest cost serve 2.2 GB
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise RecordError(f"{path}: not a text manifest (changed?)") from None
    recorded = parse(text, str(path))
    actual = file_digests(run_path)
    return Verification(
        manifest_sha256=hashlib.sha256(data).hexdigest(),
        files=len(recorded),
        changed=sorted(p for p in recorded.keys() & actual.keys() if recorded[p] != actual[p]),
        added=sorted(actual.keys() - recorded.keys()),
        removed=sorted(recorded.keys() - actual.keys()),
    )
