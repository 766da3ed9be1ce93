"""One known_hosts per rack, kept across runs: host keys enrolled once, then enforced.

Whoever can intercept the guest network could otherwise answer as every node on
every run and forge the results behind a certification. So:

- the spec may pin the keys (`guest.ssh.known_hosts`: a known_hosts file the
  operator keeps); rackcert then enrols nothing and trusts only that file;
- otherwise the rack's file is `<runs>/<rack>/known_hosts`; a node not in it yet
  is enrolled on first contact (ssh-keyscan from the controller), and every
  enrolment is returned so the stage can show and record it;
- every connection after that uses StrictHostKeyChecking=yes against the file:
  a changed key is a refused connection, never a silent re-trust.

configure, validate and bench use this module (through rackcert.core.ssh_target, which
renders these options for every client); the ssh_trust role distributes the keys
enrolled here (`peer_lines`) instead of scanning the peers itself, and validate's
ssh.peers probe and the launchers' hops from the first node carry the same lines.

A roll (rackcert upgrade) never enrols: its per-node runs live under the roll's run, so the
rack's file is derived from the runs root and the rack's name (`rack_file`), never from a
run directory's place, and a node whose key is missing or changed fails (rackcert.core
.host_key_check).

Example:
    path = rack_file(spec, Path("runs"))
    for line in enroll(path, [("10.10.0.11", 22)], pinned=is_pinned(spec)):
        print(line.describe())
    argv = ["ssh", *ssh_options(path), "--", "root@10.10.0.11", "true"]
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rackcert.core.errors import InputError

FILE_NAME = "known_hosts"
KEY_TYPES = "ed25519,ecdsa,rsa"
# One known_hosts line as ssh-keyscan writes it: host[,host] keytype base64.
_LINE = re.compile(r"^(\S+) ((?:ssh|ecdsa-sha2|sk-ssh|sk-ecdsa-sha2)-[\w@.-]+) ([A-Za-z0-9+/=]+)$")


@dataclass(frozen=True)
class Enrolled:
    """A host key trusted on first contact: shown to the operator and recorded."""

    host: str
    key_type: str
    fingerprint: str  # SHA256:... as ssh-keygen -l prints it

    def describe(self) -> str:
        return f"enrolled host key of {self.host}: {self.key_type} {self.fingerprint}"

    def to_dict(self) -> dict[str, str]:
        return {"host": self.host, "key_type": self.key_type, "fingerprint": self.fingerprint}


def is_pinned(spec: Any) -> bool:
    return bool(getattr(spec.guest.ssh, "known_hosts", None))


def rack_file(spec: Any, runs_root: Path) -> Path:
    """The known_hosts that configure, validate, bench and a roll trust for this rack.

    The spec's pinned file when it names one, else `<runs_root>/<rack>/known_hosts`, shared by
    every run of the rack. The one place the file is derived: a run directory is not asked
    where it lies (a roll's per-node runs lie under the roll's run, whose parent is no
    rack's directory).
    """
    pinned = getattr(spec.guest.ssh, "known_hosts", None)
    if pinned:
        path = Path(pinned).expanduser()
        if not path.is_file():
            raise InputError(
                f"guest.ssh.known_hosts {pinned} does not exist; create it or fix the spec"
            )
        return path
    return Path(runs_root) / spec.metadata.name / FILE_NAME


def host_name(address: str, port: int) -> str:
    """How OpenSSH names a host in known_hosts: `addr`, or `[addr]:port` off port 22."""
    return address if port == 22 else f"[{address}]:{port}"


def ssh_options(path: Path) -> list[str]:
    """OpenSSH client options that trust exactly the keys in `path`."""
    return [
        "-o",
        f"UserKnownHostsFile={path}",
        "-o",
        "GlobalKnownHostsFile=/dev/null",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "UpdateHostKeys=no",
    ]


def fingerprint(blob_b64: str) -> str:
    digest = hashlib.sha256(base64.b64decode(blob_b64)).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def known(path: Path, name: str) -> bool:
    """Whether `path` has a key for `name` (hashed entries too)."""
    return bool(lookup(path, name))


def lookup(path: Path, name: str) -> list[str]:
    """The lines of `path` that hold a key for `name`, as `ssh-keygen -F` finds them.

    Read in-process (plain names and OpenSSH's hashed `|1|salt|hmac` names), once per
    version of the file: validate asks for every node and every peer, and one
    `ssh-keygen -F` per question was most of the controller's cost per node. A file with
    patterns or markers (`*`, `?`, `!`, `@revoked`, `@cert-authority`) is left to
    ssh-keygen itself, which knows their rules.
    """
    if not path.is_file():
        return []
    stat = path.stat()
    index = _index(str(path), stat.st_mtime_ns, stat.st_size)
    if index is None:
        return _keygen_lookup(path, name)
    plain, hashed = index
    found = list(plain.get(name, []))
    for salt, digest, line in hashed:
        if hmac.new(salt, name.encode(), hashlib.sha1).digest() == digest:
            found.append(line)
    return found


@functools.lru_cache(maxsize=8)
def _index(
    path: str, _mtime_ns: int, _size: int
) -> tuple[dict[str, list[str]], list[tuple[bytes, bytes, str]]] | None:
    """{plain name: lines}, [(salt, hmac, line)] of a known_hosts file; None when it holds
    patterns or markers (then ssh-keygen answers)."""
    plain: dict[str, list[str]] = {}
    hashed: list[tuple[bytes, bytes, str]] = []
    for raw in Path(path).read_text(errors="replace").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        names = line.split()[0]
        if names.startswith("@") or any(c in names for c in "*?!"):
            return None
        if names.startswith("|1|"):
            try:
                _, _, salt, digest = names.split("|")
                hashed.append((base64.b64decode(salt), base64.b64decode(digest), line))
            except (ValueError, binascii.Error):
                continue
            continue
        for host in names.split(","):
            plain.setdefault(host, []).append(line)
    return plain, hashed


def _keygen_lookup(path: Path, name: str) -> list[str]:
    done = subprocess.run(
        ["ssh-keygen", "-F", name, "-f", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    if done.returncode != 0:
        return []
    return [ln for ln in done.stdout.splitlines() if ln.strip() and not ln.startswith("#")]


def scan(address: str, port: int, timeout: int = 5) -> list[str]:
    """The host's keys as known_hosts lines, from ssh-keyscan (first contact)."""
    done = subprocess.run(
        ["ssh-keyscan", "-T", str(timeout), "-t", KEY_TYPES, "-p", str(port), "--", address],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout * 4 + 10,
        env={"PATH": "/usr/bin:/bin"},
    )
    lines = []
    for line in done.stdout.splitlines():
        match = _LINE.match(line.strip())
        if match:
            lines.append(f"{host_name(address, port)} {match.group(2)} {match.group(3)}")
    return lines


def enroll(path: Path, hosts: list[tuple[str, int]], *, pinned: bool = False) -> list[Enrolled]:
    """Trust on first contact the hosts `path` does not know yet; return what was enrolled.

    A pinned file is never written: an unknown host stays unknown, and the ssh
    that follows refuses it. A host that does not answer the scan is left for
    the stage to report as unreachable.
    """
    if pinned:
        return []
    missing = [h for h in dict.fromkeys(hosts) if not known(path, host_name(*h))]
    if not missing:
        return []
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(16, len(missing))) as pool:
        scanned = list(pool.map(lambda h: scan(*h), missing))
    enrolled: list[Enrolled] = []
    for (address, port), lines in zip(missing, scanned, strict=True):
        if not lines:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as handle:
            handle.write("".join(line + "\n" for line in lines))
        for line in lines:
            _host, key_type, blob = line.split(" ")
            enrolled.append(Enrolled(host_name(address, port), key_type, fingerprint(blob)))
    return enrolled


def peer_lines(path: Path, peers: list[tuple[str, str, int]]) -> list[str]:
    """known_hosts lines for the nodes' own use: each peer's enrolled keys, by address and name.

    `peers` are (name, address, port). The keys come from the controller's file
    (plain and hashed entries, `lookup`), so every
    node trusts exactly what the controller enrolled or the spec pinned.
    """
    out: list[str] = []
    for name, address, port in peers:
        for line in lookup(path, host_name(address, port)):
            parts = line.split()
            if line.startswith("#") or len(parts) < 3 or not _LINE.match(" ".join(parts[:3])):
                continue
            for alias in dict.fromkeys((address, name)):
                out.append(f"{host_name(alias, port)} {parts[1]} {parts[2]}")
    return list(dict.fromkeys(out))
