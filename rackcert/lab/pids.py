"""Whether a process still runs: the one answer the lab's starters and cleaners share."""

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
