"""The link stage's iperf3 daemons belong to their own node, in any lab side by side.

Issue 34's open defect: two lab racks at once (two xdist workers each running the lab
module's tests) both have hosts named n1..n4, and the lab's hosts share one /tmp and one
pid space. Keyed on `$(hostname)`, the daemons' pidfiles were the same file, so one rack's
`server_start` killed the other's daemons mid-round ("the server has terminated", then
"Connection refused": links at 0 Gb/s). Here two one-host labs, both `n1`, keep their own.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from rackcert.lab.sshhosts.host import TestHost
from validation.bench.localisation import linkprobe


def listening(host: TestHost) -> bool:
    """True when something listens on iperf3's port in the host's network namespace."""
    out = host.exec(["ss", "-Hltn", f"sport = :{linkprobe.PORT}"]).stdout
    return bool(out.strip())


def wait_listening(host: TestHost, want: bool, timeout: float = 10.0) -> bool:
    """`iperf3 -D` binds after its parent returned, a kill lands a moment after `kill`."""
    deadline = time.monotonic() + timeout
    while listening(host) != want and time.monotonic() < deadline:
        time.sleep(0.05)
    return listening(host) == want


def test_two_labs_with_the_same_host_names_keep_their_own_daemons(ssh_hosts) -> None:  # type: ignore[no-untyped-def]
    (a,) = ssh_hosts(["n1"], owner=f"{os.getpid()}xda")
    (b,) = ssh_hosts(["n1"], owner=f"{os.getpid()}xdb")
    for h in (a, b):
        done = h.ssh(linkprobe.server_start(h.address))
        assert done.returncode == 0, done.stderr
    assert wait_listening(a, True) and wait_listening(b, True)
    # b's stage ends: its daemon goes, a's stays (before: a's went with b's start)
    assert b.ssh(linkprobe.server_stop(b.address)).returncode == 0
    assert wait_listening(b, False)
    assert listening(a), "lab b's stop killed lab a's iperf3 daemon"
    assert a.ssh(linkprobe.server_stop(a.address)).returncode == 0
    assert wait_listening(a, False)


def test_a_stale_pidfile_kills_no_other_process() -> None:
    """A pidfile left by a host that died (its daemon with it) names a pid that may be any
    process's by now: the stop kills only an iperf3."""
    bystander = subprocess.Popen(["sleep", "60"])
    node = f"stale-{os.getpid()}"
    pidfile = Path(linkprobe.pidfile(node))
    try:
        pidfile.write_text(f"{bystander.pid}\n")
        done = subprocess.run(
            ["sh", "-c", linkprobe.server_stop(node)], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        assert bystander.poll() is None, "server_stop killed a process that is no iperf3"
        assert not pidfile.exists()
    finally:
        bystander.kill()
        bystander.wait()
        pidfile.unlink(missing_ok=True)
