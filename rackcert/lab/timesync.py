"""The test hosts' time service: chrony on every host, synchronised to its switch's gateway.

Why: a VM of a real rack runs a time daemon (chrony on RHEL and Ubuntu images) against the
site's NTP servers, and rackcert's `time.sync` check judges it. The lab's hosts are real
sshd hosts in network namespaces; without a daemon of their own, `time.sync` failed in every
demo for a reason that no rack has. So the lab does what a site does:

- the bridge's gateway address (.1 of the subnet) serves NTP: one chronyd in the root
  namespace, bound to that address only, serving the machine's clock (`local stratum 8`:
  chrony.conf(5), "local": a server with no upstream, as on an isolated site network);
- every host runs its own chronyd with `server <gateway> iburst`, and `chronyc tracking`
  on the host answers as on a VM (Leap status Normal once synchronised, about 5 s here).

Every chronyd runs with `-x` (chronyd(8): never adjust the system clock), so nothing here
touches this machine's clock, and with `bindcmdaddress /` (chrony.conf(5): no Unix command
socket), because /run is shared between the hosts: each host's `chronyc` then reaches its
own daemon over UDP on the host's loopback (port 323), the fallback chronyc(1) documents.
Where chrony is not installed, nothing starts and `time.sync` says so, as before.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import subprocess
from pathlib import Path

CHRONYD = Path("/usr/sbin/chronyd")
# Poll every 16-64 s on the lab's LAN (chrony.conf(5), minpoll/maxpoll: powers of two).
_CLIENT_POLL = "minpoll 4 maxpoll 6"


def available() -> bool:
    """True where Debian's chrony is installed."""
    return CHRONYD.is_file() and os.access(CHRONYD, os.X_OK)


def gateway_of(subnet: str) -> str:
    """The subnet's .1: the bridge's own address and the hosts' default gateway."""
    return str(ipaddress.IPv4Network(subnet).network_address + 1)


def server_config(subnet: str, pidfile: Path) -> str:
    """chrony.conf of the subnet's NTP server: serves only that subnet, on its gateway."""
    return "\n".join(
        [
            f"bindaddress {gateway_of(subnet)}",
            f"allow {subnet}",
            "local stratum 8",
            "cmdport 0",
            "bindcmdaddress /",
            f"pidfile {pidfile}",
            "",
        ]
    )


def client_config(subnet: str, pidfile: Path) -> str:
    """chrony.conf of a host: its gateway as the only server; commands over loopback UDP."""
    return "\n".join(
        [
            f"server {gateway_of(subnet)} iburst {_CLIENT_POLL}",
            "bindcmdaddress 127.0.0.1",
            "bindcmdaddress /",
            f"pidfile {pidfile}",
            "",
        ]
    )


def host_start_command(conf: Path) -> str:
    """Shell line, run inside a host's namespaces, that starts its chronyd (it forks away)."""
    return (
        f"if [ -x {CHRONYD} ]; then {CHRONYD} -x -u root -f {conf} || "
        "echo 'chronyd did not start' >&2; fi"
    )


def _server_paths(runtime_root: Path, bridge: str) -> tuple[Path, Path]:
    return runtime_root / f"{bridge}-chrony.conf", runtime_root / f"{bridge}-chrony.pid"


def _running(pidfile: Path) -> int | None:
    """The pid in `pidfile` when that process is a chronyd still running, else None."""
    try:
        pid = int(pidfile.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if b"chronyd" in cmdline else None


def ensure_server(runtime_root: Path, bridge: str, subnet: str) -> int | None:
    """Start the subnet's NTP server on its gateway unless it runs; returns its pid (None
    without chrony). Idempotent, so every start of hosts on a bridge may call it."""
    if not available():
        return None
    conf, pidfile = _server_paths(runtime_root, bridge)
    pid = _running(pidfile)
    if pid is not None:
        return pid
    runtime_root.mkdir(parents=True, exist_ok=True)
    conf.write_text(server_config(subnet, pidfile))
    proc = subprocess.run(
        [str(CHRONYD), "-x", "-u", "root", "-f", str(conf)],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    if proc.returncode != 0:
        return None  # the hosts then report an unsynchronised clock: time.sync says it
    return _running(pidfile)


def stop_server(runtime_root: Path, bridge: str) -> None:
    """Stop the bridge's NTP server (before the bridge goes). Idempotent."""
    conf, pidfile = _server_paths(runtime_root, bridge)
    pid = _running(pidfile)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    for path in (conf, pidfile):
        path.unlink(missing_ok=True)
