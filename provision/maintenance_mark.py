"""rackcert's own maintenance windows, marked in vCenter so any re-run can close them.

Why: provision puts a host in maintenance mode to reboot it, and takes it out again after.
A controller killed in between leaves the host in maintenance mode, and a re-run cannot
tell that window from an operator's (which it must never close). So before entering,
provision writes a custom attribute on the host (`CustomFieldsManager.SetField`, field
`rackcert.maintenance`, vSphere API reference), and clears it after exiting. The mark
lives in vCenter, so a re-run from another machine sees it too. `recover` closes every
window that carries the mark: it waits for a host that is still rebooting, exits
maintenance mode and clears the mark; a host in maintenance mode without it is left alone.
"""

from __future__ import annotations

import time
from typing import Any

from provision.viewspec import view_filter_spec
from provision.vsphere_ops import ApplyError, wait_task

FIELD = "rackcert.maintenance"


def field_key(si: Any, *, create: bool) -> int | None:
    """The key of the rackcert.maintenance host attribute; created when asked and absent."""
    from pyVmomi import vim

    manager = si.content.customFieldsManager
    if manager is None:
        return None
    for field in manager.field or []:
        if field.name == FIELD and field.managedObjectType in (vim.HostSystem, None):
            return int(field.key)
    if not create:
        return None
    try:
        return int(manager.AddCustomFieldDef(name=FIELD, moType=vim.HostSystem).key)
    except vim.fault.DuplicateName:  # another controller made it meanwhile
        return field_key(si, create=False)


def mark(si: Any, host: Any, key: int, run: str) -> None:
    """Note in vCenter that rackcert (this run) put the host in maintenance mode."""
    si.content.customFieldsManager.SetField(entity=host, key=key, value=f"entered by {run}")


def clear(si: Any, host: Any, key: int) -> None:
    si.content.customFieldsManager.SetField(entity=host, key=key, value="")


def marked_hosts(si: Any, key: int) -> list[tuple[Any, str, bool, str]]:
    """Every host carrying the mark: (host, name, in maintenance, connection state), read in
    one PropertyCollector retrieval over a container view."""
    from pyVmomi import vim

    content = si.content
    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.HostSystem], True)
    try:
        spec = view_filter_spec(
            view,
            {
                vim.HostSystem: [
                    "name",
                    "customValue",
                    "runtime.inMaintenanceMode",
                    "runtime.connectionState",
                ]
            },
        )
        found = []
        for obj in content.propertyCollector.RetrieveContents([spec]):
            props = {p.name: p.val for p in obj.propSet}
            values = props.get("customValue") or []
            if any(v.key == key and getattr(v, "value", "") for v in values):
                found.append(
                    (
                        obj.obj,
                        str(props.get("name", obj.obj._moId)),
                        bool(props.get("runtime.inMaintenanceMode")),
                        str(props.get("runtime.connectionState", "")),
                    )
                )
        return found
    finally:
        view.DestroyView()


def recover(si: Any, *, reboot_timeout: float = 1800.0, say: Any = None) -> list[str]:
    """Close the maintenance windows rackcert opened and did not close (a killed run).

    Returns the names of the hosts taken out of maintenance mode. A host still rebooting
    is waited for (up to `reboot_timeout`); one that does not come back is an ApplyError.
    """
    key = field_key(si, create=False)
    if key is None:
        return []
    closed = []
    for host, name, in_maintenance, state in marked_hosts(si, key):
        if in_maintenance:
            if state != "connected":
                _wait_connected(host, name, reboot_timeout)
            wait_task(
                host.ExitMaintenanceMode_Task(timeout=0),
                f"{name}: exit the maintenance mode an earlier run of rackcert entered",
            )
            closed.append(name)
            if say is not None:
                say(f"{name}: taken out of the maintenance mode an interrupted run entered")
        clear(si, host, key)
    return closed


def _wait_connected(host: Any, name: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    delay = 0.05
    while str(host.runtime.connectionState) != "connected":
        if time.monotonic() > deadline:
            raise ApplyError(
                f"{name}: in the maintenance mode an interrupted run of rackcert entered, and"
                f" not connected after {timeout:.0f} s: check the host, then re-run provision"
            )
        time.sleep(delay)
        delay = min(delay * 2, 2.0)
