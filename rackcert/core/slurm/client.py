"""Slurm's own clients (scontrol, squeue, sinfo) run one way wherever rackcert calls them.

Why one place: the health check and the rolling upgrade both drive scontrol, often from a
program Slurm started with no PATH of its own (HealthCheckProgram, a prolog). Each call gets
the same short environment (the client configuration only when one is named: a site's
password variables never reach Slurm's tools), the same search path and a timeout.

    proc = run_client("scontrol", "show", "node", "n1", "-o", conf="/etc/slurm/slurm.conf")
"""

from __future__ import annotations

import shutil
import subprocess

# Where Slurm's clients live when the caller gives no PATH: a site's own build first.
SLURM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def client_env(conf: str | None = None) -> dict[str, str]:
    """The environment a Slurm client runs with: the search path, a C locale, the conf."""
    env = {"PATH": SLURM_PATH, "LANG": "C.UTF-8"}
    if conf:
        env["SLURM_CONF"] = conf
    return env


def run_client(
    tool: str, *args: str, conf: str | None = None, timeout: float = 15.0
) -> subprocess.CompletedProcess[str]:
    """Run a Slurm client; its exit status and output are the caller's to judge. Raises
    OSError when it cannot start and subprocess.TimeoutExpired past `timeout`."""
    binary = shutil.which(tool, path=SLURM_PATH) or tool
    return subprocess.run(
        [binary, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=client_env(conf),
    )
