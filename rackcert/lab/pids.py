"""Whether a process still runs, and whether a lab owner's does: the one answer the lab's
starters and cleaners share."""

from __future__ import annotations

import os
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """True while `pid` runs. A zombie has ended (only its parent's wait is missing), so it
    counts as gone; a process of another user (EPERM) counts as running."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # proc(5): the state is the first field after the command's closing parenthesis
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def owner_pid(owner: str) -> int | None:
    """The pid an owner tag names (`1234`, or `1234x2` for one of its sets); None for "lab"."""
    head = owner.split("x", 1)[0]
    return int(head) if head.isdigit() else None


def owner_dead(owner: str) -> bool:
    """True when the owner is a pid that no longer runs (never for the persistent "lab")."""
    pid = owner_pid(owner)
    return pid is not None and not pid_alive(pid)
