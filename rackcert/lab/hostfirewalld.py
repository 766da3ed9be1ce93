"""firewalld running for real on a test host: its own D-Bus system bus, its nftables in the
host's network namespace.

Why: a RHEL 9 node runs firewalld by default, and its public zone rejects what it does not
allow: slurmd's port, srun's ports and the launchers' ports stay shut until the roles open
them (node_policy). The EL stand-ins (rackcert.lab.hostfamily) run the same daemon, Debian's
firewalld 1.3 (the 1.x line RHEL 9 ships) with the nftables backend, so that the roles'
rules are tested by what they let through, not only by what firewall-cmd answers.

What a host gets, inside its own namespaces only (the machine's firewall and bus are never
touched):
- a private /run/dbus and /run/firewalld (a tmpfs each, mounted in the host's mount namespace);
- its own system bus: dbus-daemon with the configuration below, listening where a RHEL node's
  bus listens, /run/dbus/system_bus_socket. D-Bus names that path the system bus's default
  address when DBUS_SYSTEM_BUS_ADDRESS is unset (D-Bus Specification, "Well-known Message Bus
  Instances": unix:path=/var/run/dbus/system_bus_socket; /var/run links to /run), so every
  client on the host finds it as on a node: firewall-cmd run by Ansible over SSH, commands the
  tests run with nsenter, and firewalld itself. (Setting DBUS_SYSTEM_BUS_ADDRESS through sshd's
  `SetEnv` would reach SSH sessions only.)
- firewalld, `--nofork --nopid` (firewalld(1): stay in the foreground; no pid file, no check
  for another instance, which is the machine's business), the host's /etc/firewalld
  (an overlay: the host's own zones) with Debian's firewalld.conf: FirewallBackend=nftables,
  DefaultZone=public. Its rules are nftables tables in the host's netns (`table inet
  firewalld`), which the kernel keeps per network namespace (nft(8): a ruleset belongs to the
  netns it was loaded in).

Both daemons are processes of the host's netns, so stopping the host ends them
(TestHost.kill kills every process in the netns).

    start_firewalld([h1, h2])        # after make_family(host, "rhel-9")
    h1.exec(["firewall-cmd", "--state"]).stdout   # "running\\n"
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from rackcert.lab.sshhosts.common import SshHostError, tail
from rackcert.lab.sshhosts.host import TestHost

FIREWALLD = "/usr/sbin/firewalld"
DBUS_DAEMON = "/usr/bin/dbus-daemon"
BUS_SOCKET = "/run/dbus/system_bus_socket"

# dbus-daemon(1), CONFIGURATION FILE: <type>system</type> makes it the system bus; <listen> its
# address; <auth>EXTERNAL</auth> (the system bus's only mechanism: the peer's uid from the
# socket); the default <policy> is the one the reference system.conf ships (deny owning names
# and method calls unless a service's file allows them, allow replies and signals); <includedir>
# reads the services' own policies, among them firewalld's FirewallD.conf (root may own
# org.fedoraproject.FirewallD1; anyone may call it, and firewalld itself authorises: polkit
# where it runs, else only uid 0, firewall/server/decorators.py). No <user>: it stays root (a
# node's bus runs as its messagebus/dbus user; nothing here depends on it), no <fork/>, no
# <pidfile>, no activation (firewalld is started here, not by the bus).
BUS_CONFIG = f"""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={BUS_SOCKET}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus"
           send_interface="org.freedesktop.DBus.Introspectable"/>
    <allow send_destination="org.freedesktop.DBus"
           send_interface="org.freedesktop.DBus.Properties"/>
  </policy>
  <includedir>/usr/share/dbus-1/system.d</includedir>
</busconfig>
"""


def firewalld_available() -> str | None:
    """None when this machine has firewalld and dbus-daemon; else what is missing."""
    missing = [p for p in (FIREWALLD, DBUS_DAEMON) if not Path(p).is_file()]
    if missing or not shutil.which("firewall-cmd"):
        return f"{', '.join(missing) or 'firewall-cmd'} not found: install firewalld (.ci/setup)"
    return None


def start_firewalld(hosts: Sequence[TestHost], *, timeout: float = 60.0) -> None:
    """Start each host's system bus, then its firewalld; return once `firewall-cmd --state`
    says running on every host (firewall-cmd(1): "running", exit 0, once firewalld has loaded
    its configuration). The hosts start side by side: firewalld's start-up (about 3 s of
    Python on a loaded 2-core machine) dominates."""
    why = firewalld_available()
    if why:
        raise SshHostError(why)
    for host in hosts:
        _start_bus(host)
    deadline = time.monotonic() + timeout
    for host in hosts:
        while not host.path(BUS_SOCKET).is_socket():
            _wait(host, deadline, host.runtime_dir / "dbus.log", "its system bus")
        _spawn(host, [FIREWALLD, "--nofork", "--nopid"], host.runtime_dir / "firewalld.log")
    for host in hosts:
        while host.exec(["firewall-cmd", "--state"], timeout=30).stdout.strip() != "running":
            _wait(host, deadline, host.runtime_dir / "firewalld.log", "firewalld")


def _start_bus(host: TestHost) -> None:
    rt = host.runtime_dir
    (rt / "dbus-system.conf").write_text(BUS_CONFIG)
    # Mount points in the machine's shared /run (empty directories), then a tmpfs on each in
    # the host's own mount namespace: the host's bus socket and firewalld's state are its own.
    for d in ("/run/dbus", "/run/firewalld"):
        Path(d).mkdir(parents=True, exist_ok=True)
    mounts = (
        "mount -t tmpfs -o mode=0755 rackcert-dbus /run/dbus &&"
        " mount -t tmpfs -o mode=0750 rackcert-firewalld /run/firewalld"
    )
    mounted = host.exec(["sh", "-c", mounts])
    if mounted.returncode != 0:
        raise SshHostError(f"{host.name}: private /run/dbus: {mounted.stderr.strip()}")
    # dbus-daemon(1): --nofork stays in the foreground; --nopidfile and --nosyslog (no syslog
    # on a test host) override the system bus's usual settings.
    _spawn(host, [DBUS_DAEMON, f"--config-file={rt / 'dbus-system.conf'}", "--nofork",
                  "--nopidfile", "--nosyslog"], rt / "dbus.log")  # fmt: skip


def _spawn(host: TestHost, argv: list[str], log: Path) -> None:
    """Start a daemon in the host's namespaces, detached (setsid -f: its own session, and
    the parent returns at once), its output in `log`."""
    with open(log, "wb") as out:
        subprocess.run(
            ["nsenter", "-t", str(host.pid), "-n", "-m", "-u", "--", "setsid", "-f", *argv],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            check=True,
            timeout=30,
        )


def _wait(host: TestHost, deadline: float, log: Path, what: str) -> None:
    if time.monotonic() > deadline:
        raise SshHostError(f"{host.name}: {what} did not start: {tail(log)}")
    time.sleep(0.1)
