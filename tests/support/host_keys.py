"""What more than one test module needs from the old test_host_keys.py:
tests/integration/test_bench_nodes.py, tests/integration/test_host_keys.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time


def rekey(host) -> None:
    """A new host key behind the same address: sshd re-reads its keys on SIGHUP."""
    key = host.runtime_dir / "ssh_host_ed25519_key"
    key.unlink()
    key.with_suffix(".pub").unlink(missing_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    pid = int((host.runtime_dir / "sshd.pid").read_text())
    os.kill(pid, signal.SIGHUP)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not host.reachable():
        time.sleep(0.2)
