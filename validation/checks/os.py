"""OS checks: the release the spec names and a synchronised clock."""

from __future__ import annotations

from rackcert.core.results import Severity
from validation.checks import NodeView, Outcome, check, failed, passed, skipped
from validation.facts.system import Clock, LinuxDistribution


@check("os.release", facts=(LinuxDistribution,), severity=Severity.warning)
def release(view: NodeView) -> Outcome:
    """/etc/os-release matches guest.os (ubuntu-22.04, rhel-9, debian-12: ID-VERSION_ID prefix).

    Fix: deploy the VM from a template of the spec's guest.os, or correct guest.os.
    """
    want = view.expect.os
    if not want:
        return skipped("guest.os is not set in the spec")
    info = view.fact(LinuxDistribution).get("release_meta") or {}
    seen = f"{info.get('ID', '?')}-{info.get('VERSION_ID', '?')}"
    wid, _, wver = want.partition("-")
    ok = info.get("ID") == wid and (
        info.get("VERSION_ID", "") == wver or info.get("VERSION_ID", "").startswith(wver + ".")
    )
    if not ok:
        return failed(f"{seen} ({info.get('PRETTY_NAME', '')})", want, "OS differs from the spec")
    return passed(f"{seen} ({info.get('PRETTY_NAME', '')})", want)


@check("time.sync", facts=(Clock,), severity=Severity.warning)
def clock(view: NodeView) -> Outcome:
    """The clock is NTP-synchronised (timedatectl NTPSynchronized=yes, or chrony leap Normal).

    Fix: enable chrony or systemd-timesyncd against the site's NTP servers.
    """
    synced, seen = view.fact(Clock)
    if not synced:
        return failed(seen, "synchronised", "clock not synchronised")
    return passed(seen, "synchronised")
