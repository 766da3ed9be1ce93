"""What every part of a test host shares: its error, the command runner, the runtime directory.

Why a module of its own: the network, sshd and the host itself all run system tools that must
succeed (ip, ssh-keygen) and fail with one error type naming the command; keeping that here
lets each of them stay about one idea without importing the others.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path

from rackcert.core.errors import RackcertError

# What sshd reads and writes (config, host key, pid, log) and the time servers' pid files:
# outside every overlay and outside /root, which each host replaces by a fresh home.
RUNTIME_ROOT = Path("/run/rackcert-sshhosts/hosts")


class SshHostError(RackcertError):
    """A test host could not be started or stopped; the message says which and why."""


def run_cmd(cmd: Sequence[str], *, check: bool = True, input: str | None = None) -> str:
    """Run a system tool; its stdout. With `check`, a non-zero exit is an SshHostError."""
    proc = subprocess.run(list(cmd), capture_output=True, text=True, input=input, check=False)
    if check and proc.returncode != 0:
        raise SshHostError(f"{shlex.join(cmd)} failed: {proc.stderr.strip() or proc.returncode}")
    return proc.stdout


def tail(path: Path, lines: int = 3) -> str:
    """The last lines of a log, joined on one line (for an error message); "" if unreadable."""
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""
