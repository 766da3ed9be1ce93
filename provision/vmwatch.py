"""A watch over every VM of a vCenter: the properties asked for, as vCenter pushes them.

Why here: the lab's guest agent (rackcert.lab.guest_agent) plays the guests of the twin's
VMs and must learn when each powers on or off; provision is the one package that speaks the
vSphere API, so the watch's pyVmomi calls are written here and the agent reads plain dicts.
One PropertyCollector of its own with a filter over a ContainerView of every VM, and one
WaitForUpdatesEx at a time (vSphere Web Services SDK Programming Guide, "Property
Collector": WaitForUpdatesEx reports each object entering the view and each change since the
version it is given; an object that leaves the view comes as kind "leave").

    with VmWatch(si, ["name", "runtime.powerState"], wait_s=1) as watch:
        powered_on = watch.next_round()     # None: nothing changed within wait_s
        watch.vms[moid]["runtime.powerState"]
"""

from __future__ import annotations

import contextlib
from typing import Any

from provision.viewspec import view_filter_spec

POWER = "runtime.powerState"


class VmWatch:
    """Every VM's `paths`, folded into `vms` (moid -> {path: value}) at each round.

    `vms` may be given: a watch opened again after a lost connection folds into what the
    last one saw, so a VM that stayed on is not taken for one that just powered on.
    `collector` is the watch's own PropertyCollector, for CancelWaitForUpdates from another
    thread (provision.guestwatch.cancel_waits)."""

    def __init__(
        self,
        si: Any,
        paths: list[str],
        wait_s: int = 1,
        vms: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        from pyVmomi import vim, vmodl

        content = si.content
        self.vms: dict[str, dict[str, Any]] = {} if vms is None else vms
        self.version = ""
        self.view = content.viewManager.CreateContainerView(
            content.rootFolder, [vim.VirtualMachine], True
        )
        try:
            self.collector = content.propertyCollector.CreatePropertyCollector()
            spec = view_filter_spec(self.view, {vim.VirtualMachine: paths})
            self.collector.CreateFilter(spec, partialUpdates=False)
        except Exception:
            self.close()
            raise
        self.options = vmodl.query.PropertyCollector.WaitOptions(maxWaitSeconds=wait_s)

    def next_round(self) -> set[str] | None:
        """One WaitForUpdatesEx: None when nothing changed within wait_s; else the moids of
        the VMs that powered on in this round (the changes are folded into `vms`)."""
        update = self.collector.WaitForUpdatesEx(self.version, self.options)
        if update is None:
            return None
        self.version = update.version
        powered_on: set[str] = set()
        for filter_set in update.filterSet or []:
            for obj in filter_set.objectSet or []:
                moid = obj.obj._moId
                if obj.kind == "leave":
                    self.vms.pop(moid, None)
                    continue
                props = self.vms.setdefault(moid, {})
                was = props.get(POWER)
                for change in obj.changeSet or []:
                    props[change.name] = None if change.op == "remove" else change.val
                if props.get(POWER) == "poweredOn" and was != "poweredOn":
                    powered_on.add(moid)
        return powered_on

    def close(self) -> None:
        """Destroy the watch's collector and view (best effort: the session may be gone)."""
        collector = getattr(self, "collector", None)
        if collector is not None:
            with contextlib.suppress(Exception):
                collector.DestroyPropertyCollector()
        with contextlib.suppress(Exception):
            self.view.DestroyView()

    def __enter__(self) -> VmWatch:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def vm_config(si: Any, moid: str) -> tuple[dict[str, str], str] | None:
    """One read of a VM's config: its extraConfig (values as text) and its BIOS UUID
    (config.uuid); None when the VM is gone (destroyed since it was seen)."""
    from pyVmomi import vim

    vm = vim.VirtualMachine(moid, stub=si._stub)
    try:
        config = vm.config
        if config is None:  # no configuration to read (yet, or any more)
            return None
        extra = {o.key: str(o.value) for o in config.extraConfig or []}
    except Exception:  # noqa: BLE001 - destroyed in between
        return None
    return extra, config.uuid or ""
