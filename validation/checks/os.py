"""OS checks: the release the spec names and a synchronised clock."""

from __future__ import annotations

from rackcert.results import Severity
from validation import parsers
from validation.checks import NodeView, Outcome, check, failed, passed, skipped


@check("os.release", probes=("os_release",), severity=Severity.warning)
def release(view: NodeView) -> Outcome:
    """/etc/os-release matches guest.os (ubuntu-22.04, rhel-9, debian-12: ID-VERSION_ID prefix).

    Fix: deploy the VM from a template of the spec's guest.os, or correct guest.os.
    """
    want = view.expect.os
    if not want:
        return skipped("guest.os is not set in the spec")
    info = parsers.os_release(view.text("os_release"))
    seen = f"{info.get('ID', '?')}-{info.get('VERSION_ID', '?')}"
    wid, _, wver = want.partition("-")
    ok = info.get("ID") == wid and (
        info.get("VERSION_ID", "") == wver or info.get("VERSION_ID", "").startswith(wver + ".")
    )
    if not ok:
        return failed(f"{seen} ({info.get('PRETTY_NAME', '')})", want, "OS differs from the spec")
    return passed(f"{seen} ({info.get('PRETTY_NAME', '')})", want)


@check("time.sync", probes=("clock",), severity=Severity.warning)
def clock(view: NodeView) -> Outcome:
    """The clock is NTP-synchronised (timedatectl NTPSynchronized=yes, or chrony leap Normal).

    Fix: enable chrony or systemd-timesyncd against the site's NTP servers.
    """
    synced, seen = parsers.clock_synced(view.text("clock"))
    if not synced:
        return failed(seen, "synchronised", "clock not synchronised")
    return passed(seen, "synchronised")
