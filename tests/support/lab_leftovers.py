"""What a lab starter left behind: its namespaces, bridges and processes, found from outside.

Used by tests/integration/test_lab_signals.py after a benchmark or the demo was stopped by a
signal. A
lab is named by its owner's pid (rackcert.lab.sshhosts: namespaces `rackcert-<pid>-<host>`,
bridges whose alias names the owner; rackcert.lab.lifetime: every process it starts carries
RACKCERT_LAB_OWNER=<pid>), so what is left is found without knowing what the starter did:

- network namespaces named after the owner, and the processes still inside them;
- bridges whose alias names the owner;
- processes whose command line names the lab (its namespaces, its bridges, or a path the
  caller gives, such as the benchmark's work directory), or whose environment
  carries the owner's tag.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

OWNER_ENV = "RACKCERT_LAB_OWNER"


@dataclass
class Leftovers:
    namespaces: list[str] = field(default_factory=list)
    bridges: list[str] = field(default_factory=list)
    processes: list[tuple[int, str]] = field(default_factory=list)  # (pid, command line)

    def __bool__(self) -> bool:
        return bool(self.namespaces or self.bridges or self.processes)

    def summary(self) -> str:
        """One line: counts, then each process by its program name."""
        if not self:
            return "nothing"
        names: dict[str, int] = {}
        for _, cmdline in self.processes:
            prog = Path(cmdline.split()[0]).name if cmdline.split() else "?"
            names[prog] = names.get(prog, 0) + 1
        progs = ", ".join(f"{n} {p}" for p, n in sorted(names.items()))
        return (
            f"{len(self.namespaces)} network namespaces, {len(self.bridges)} bridges,"
            f" {len(self.processes)} processes ({progs or 'none'})"
        )


def _owner_re(owner: int) -> re.Pattern[str]:
    return re.compile(rf"rackcert-{owner}(?:x[0-9a-z]+)?-")


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def _environ_owner(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    for item in raw.split(b"\0"):
        if item.startswith(OWNER_ENV.encode() + b"="):
            return item.split(b"=", 1)[1].decode(errors="replace")
    return None


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def find(owner: int, names: Sequence[str] = ()) -> Leftovers:
    """Everything of the lab owned by pid `owner` that still exists."""
    pattern = _owner_re(owner)
    out = Leftovers()
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    out.namespaces = [
        line.split()[0] for line in listing.splitlines() if line and pattern.match(line.split()[0])
    ]
    in_namespaces: set[int] = set()
    for netns in out.namespaces:
        pids = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True)
        in_namespaces |= {int(p) for p in pids.stdout.split() if p.isdigit()}
    tag = re.compile(rf"owner={owner}(?:x[0-9a-z]+)?$")
    for link in Path("/sys/class/net").glob("rcb*"):
        try:
            alias = (link / "ifalias").read_text().strip()
        except OSError:
            continue
        if tag.search(alias):
            out.bridges.append(link.name)
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == owner:
            continue
        pid = int(proc.name)
        cmdline = _cmdline(pid)
        if not cmdline or _zombie(pid):
            continue
        named = pattern.search(cmdline) or any(n in cmdline for n in [*names, *out.bridges])
        tagged = (_environ_owner(pid) or "").split("x", 1)[0] == str(owner)
        if pid in in_namespaces or named or tagged:
            out.processes.append((pid, cmdline))
    return out
