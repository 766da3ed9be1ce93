"""Reboot an ESXi host through vCenter and wait until it is really back.

RebootHost_Task completes when the host has accepted the reboot (vSphere API
reference, HostSystem.RebootHost_Task), not when it is up again: vCenter keeps
showing the host `connected` until its heartbeat times out, then
`notResponding` for minutes, then `connected` again with a later
`runtime.bootTime`. Calls that need the host fault in that window. So the only
proof of a reboot is a boot time later than the one read before it; while
waiting, faults and dropped connections are expected and tolerated, the wait
is bounded, and progress is reported: the host is looked at after about a tenth of the
time waited so far (a reboot of minutes is seen back within seconds, one on a twin's
shrunk clock within a tenth of it, and the polls stay few). Once the host is back, its passthrough
state is refreshed (HostPciPassthruSystem.Refresh) before any VM work relies
on it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from rackcert.core.errors import RackcertError
from rackcert.core.vsphere_rules import TRANSIENT_FAULTS

Progress = Callable[[str], None]
REBOOT_TIMEOUT_S = 1800.0
VCENTER_GRACE_S = 20.0


class RebootError(RackcertError):
    """The host did not come back from its reboot in time, or came back without its devices."""


def _runtime(host: Any) -> tuple[datetime | None, str, str]:
    """(bootTime, connectionState, powerState) in one property read."""
    runtime = host.runtime
    return runtime.bootTime, str(runtime.connectionState), str(runtime.powerState)


def _quiet(_detail: str) -> None:
    return None


def wait_rebooted(
    host: Any,
    name: str,
    boot_before: datetime | None,
    *,
    timeout: float = REBOOT_TIMEOUT_S,
    progress: Progress = _quiet,
    poll: float = 0.05,
    poll_max: float = 5.0,
) -> datetime:
    """Wait until the host is connected, powered on and booted after `boot_before`.

    Looks again after a tenth of the time waited, at least `poll`, at most `poll_max`
    seconds. Returns the new boot time. Raises RebootError after `timeout` seconds,
    naming the last state seen.
    """
    from pyVmomi import vmodl

    from provision.vsphere_ops import POLL_CAP_S

    started = time.monotonic()
    seen = "reboot accepted"
    poll_max = min(poll_max, 2.5 * POLL_CAP_S["task"])  # a faster twin clock polls faster
    lost_since: float | None = None
    while True:
        try:
            boot, connection, power = _runtime(host)
            later = boot is not None and (boot_before is None or boot > boot_before)
            if later and connection == "connected" and power == "poweredOn":
                return boot
            seen = f"{connection}, power {power}" + ("" if later else ", not rebooted yet")
        except vmodl.MethodFault as exc:
            seen = f"unreachable ({type(exc).__name__})"
        except TRANSIENT_FAULTS as exc:  # what a restarting vCenter proxy gives
            # A host's reboot does not take vCenter away: a short drop is tolerated,
            # vCenter unreachable for VCENTER_GRACE_S is the caller's error.
            lost_since = lost_since or time.monotonic()
            if time.monotonic() - lost_since > VCENTER_GRACE_S:
                raise
            seen = f"vCenter connection dropped ({type(exc).__name__})"
        else:
            lost_since = None
        waited = time.monotonic() - started
        if waited > timeout:
            raise RebootError(
                f"{name}: not back {timeout:.0f} s after the reboot (last seen: {seen});"
                " check the host's console, then re-run provision"
            )
        progress(f"{name}: rebooting, {seen} ({waited:.0f} s)")
        time.sleep(min(poll_max, max(poll, waited / 10)))


def refresh_passthrough(host: Any, name: str, expect_active: list[str]) -> None:
    """Refresh the host's passthrough view; the devices the plan enabled must be active now."""
    system = host.configManager.pciPassthruSystem
    system.Refresh()
    active = {p.id for p in system.pciPassthruInfo or [] if p.passthruActive}
    missing = [pci for pci in expect_active if pci not in active]
    if missing:
        raise RebootError(
            f"{name}: passthrough of {', '.join(missing)} is not active after the reboot;"
            " check the devices in the host client (Manage > Hardware > PCI Devices)"
        )


def reboot_host(
    host: Any,
    name: str,
    wait_task: Callable[[Any, str], Any],
    *,
    expect_active: list[str],
    timeout: float = REBOOT_TIMEOUT_S,
    progress: Progress = _quiet,
) -> datetime:
    """Reboot (host in maintenance mode), wait for a later boot, refresh passthrough."""
    boot_before, _, _ = _runtime(host)
    wait_task(host.RebootHost_Task(force=False), f"{name}: reboot")
    boot = wait_rebooted(host, name, boot_before, timeout=timeout, progress=progress)
    refresh_passthrough(host, name, expect_active)
    return boot
