"""Lab links with a line rate, and the faults a rack has, planted with tc and cgroups.

Why: unshaped, two lab hosts talk at whatever this machine's CPUs manage (16.8 Gb/s for
one pair, far less for eight at once), so a "line rate" means nothing and no threshold
can be judged. Shaped, every host's link has one rate that this machine holds on all
links at once (100 Mbit/s: sixteen hosts, eight iperf3 pairs both ways at once, each
direction received 0.86-0.96 of it on a busy machine; at 200 Mbit/s one of two pairs fell
to 0.77), the lab spec declares it (certification.line_rate_gbps), and the lab is judged
as a rack.

This kernel has tbf, htb and the u32 classifier; no netem, no tc actions, no ifb (see the
project's notes on lab links). So both directions of a host's link are shaped on egress:
- to the host: the bridge-side veth (root namespace), `tbf`;
- from the host: its own `eth0` (inside its namespace), `tbf`, or `htb` when one
  destination gets a class of its own (a bad cable between two hosts: `u32 match ip dst`).
A CPU fault is a cgroup v1 `cpu.cfs_quota_us` over the host's processes (its sshd and
everything started from it inherit the group).

    shape_host(host, 100)            # the lab's line rate, both directions
    shape_host(host, 50)             # a node whose NIC trained at half rate
    shape_link(a, b, 50, line=100)   # one bad cable: a<->b only
    with cpu_quota(host, 0.25): ...  # a quarter of a core
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rackcert.core.errors import RackcertError

CGROUP_CPU = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 100_000


class LinkShapeError(RackcertError):
    """A tc or cgroup command failed; the message names the host and the command."""


def _run(argv: Sequence[str]) -> str:
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=30)
    if done.returncode != 0:
        raise LinkShapeError(f"{' '.join(argv)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def bridge_veth(host: Any) -> str:
    """The root-namespace end of the host's eth0 (its port on the lab's switch)."""
    out = _run(["ip", "-n", host.netns, "-o", "link", "show", "eth0"])
    peer = out.split("@if", 1)[1].split(":", 1)[0] if "@if" in out else ""
    for dev in Path("/sys/class/net").iterdir():
        with contextlib.suppress(OSError):
            if (dev / "ifindex").read_text().strip() == peer:
                return dev.name
    raise LinkShapeError(f"{host.name}: no bridge-side veth for eth0 (@if{peer})")


def _burst(mbit: float) -> str:
    # 20 ms at the rate (tbf needs at least rate / HZ), never below 32 KiB.
    return f"{max(32 * 1024, int(mbit * 1e6 / 8 * 0.02))}b"


def _packets_in(mbit: float, seconds: float) -> int:
    """Full-size (1514-byte) frames the rate sends in `seconds`, at least 10."""
    return max(10, int(mbit * 1e6 / 8 * seconds / 1514))


def _tbf(mbit: float) -> list[str]:
    return ["tbf", "rate", f"{mbit}mbit", "burst", _burst(mbit), "latency", "50ms"]


def _tc_in(host: Any, *args: str) -> None:
    _run(["tc", "-n", host.netns, *args])


def shape_host(host: Any, mbit: float) -> None:
    """Both directions of the host's link at `mbit` (tbf): to it and from it."""
    _run(["tc", "qdisc", "replace", "dev", bridge_veth(host), "root", *_tbf(mbit)])
    _tc_in(host, "qdisc", "replace", "dev", "eth0", "root", *_tbf(mbit))


def shape_hosts(hosts: Sequence[Any], gbps: float) -> None:
    """Every host's link at the lab's line rate (`gbps`, as the spec declares it)."""
    for h in hosts:
        shape_host(h, gbps * 1000)


def shape_lab(hosts: Sequence[Any], spec: Any) -> None:
    """The lab's hosts at the line rate its spec declares (certification.line_rate_gbps);
    nothing when it declares none."""
    rate = spec.certification.line_rate_gbps
    if rate:
        shape_hosts(hosts, rate)


def shape_link(a: Any, b: Any, mbit: float, *, line: float) -> None:
    """Traffic between a and b (both ways) at `mbit`; everything else at `line` Mbit/s.

    On each host's eth0: htb, default class at the line rate, one class at `mbit` that
    a u32 filter on the other host's address sends its packets to.
    """
    for src, dst in ((a, b), (b, a)):
        root = "qdisc replace dev eth0 root handle 1: htb default 10"
        _tc_in(src, *root.split())
        for cls, rate in (("1:10", line), ("1:20", mbit)):
            shape = f"rate {rate}mbit ceil {rate}mbit burst {_burst(rate)} cburst {_burst(rate)}"
            _tc_in(src, *f"class replace dev eth0 parent 1: classid {cls} htb {shape}".split())
            # The class's queue holds 50 ms, as tbf's `latency 50ms` does: htb's default
            # (the veth's 1000 packets, 120 ms at 100 Mbit/s) delays the ACKs of the other
            # direction behind a full queue, which slowed the pair's reverse flow.
            limit = _packets_in(rate, 0.05)
            _tc_in(src, *f"qdisc replace dev eth0 parent {cls} pfifo limit {limit}".split())
        match = f"u32 match ip dst {dst.address}/32 flowid 1:20"
        _tc_in(src, *f"filter replace dev eth0 parent 1: protocol ip prio 1 {match}".split())


def unshape(host: Any) -> None:
    """No qdisc of ours on the host's link (its default again); idempotent."""
    subprocess.run(
        ["tc", "qdisc", "del", "dev", bridge_veth(host), "root"], capture_output=True, check=False
    )
    subprocess.run(
        ["tc", "-n", host.netns, "qdisc", "del", "dev", "eth0", "root"],
        capture_output=True,
        check=False,
    )


def _cpu_cgroup_of(pid: int) -> str:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return path
    return "/"


def host_pids(host: Any) -> list[int]:
    """Every process of the host: its network namespace's, and its first process."""
    out = subprocess.run(
        ["ip", "netns", "pids", host.netns], capture_output=True, text=True, check=False
    ).stdout
    pids = {int(p) for p in out.split() if p.isdigit()}
    return sorted(pids | {host.pid})


@contextlib.contextmanager
def cpu_quota(host: Any, cores: float) -> Iterator[Path]:
    """The host's processes (and what they start) limited to `cores` CPUs while inside;
    afterwards they are back in the groups they came from and the group is removed."""
    if not (CGROUP_CPU / "cpu.cfs_quota_us").is_file():
        raise LinkShapeError("no cgroup v1 cpu controller at /sys/fs/cgroup/cpu")
    group = CGROUP_CPU / f"rackcert-fault-{os.getpid()}-{host.name}"
    group.mkdir(exist_ok=True)
    (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
    (group / "cpu.cfs_quota_us").write_text(str(max(1000, int(cores * PERIOD_US))))
    before: dict[int, str] = {}
    try:
        for pid in host_pids(host):
            with contextlib.suppress(OSError):
                before[pid] = _cpu_cgroup_of(pid)
                (group / "cgroup.procs").write_text(str(pid))
        yield group
    finally:
        for pid in _procs(group):
            home = CGROUP_CPU / before.get(pid, "/").lstrip("/")
            with contextlib.suppress(OSError):
                (home if home.is_dir() else CGROUP_CPU).joinpath("cgroup.procs").write_text(
                    str(pid)
                )
        for pid in _procs(group):  # children started inside: to the root group
            with contextlib.suppress(OSError):
                (CGROUP_CPU / "cgroup.procs").write_text(str(pid))
        with contextlib.suppress(OSError):
            group.rmdir()


def _procs(group: Path) -> list[int]:
    try:
        return [int(p) for p in (group / "cgroup.procs").read_text().split()]
    except OSError:
        return []
