"""The upgrade's hypervisor port over pyVmomi: VMs and hosts, as the roll asks for them.

The roll (rackcert.upgrade) asks for power, guest shutdown, maintenance windows, reboots and
boot times by the spec's names; this adapter answers through the vSphere API, with
provision's own session, task waits, power-on and guest wait (so a VM the roll powers on is
waited for as provision waits for a new clone). Maintenance windows carry rackcert's mark
(provision/maintenance_mark.py) so any re-run can tell them from an operator's. A fault is a
HypervisorError naming the object and the call, with the fault's own message.

    hv = VSphereHypervisor(spec)
    hv.enter_maintenance("esx01", run="20261206T120000Z")
    hv.reboot("esx01"); hv.boot_time("esx01")
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from rackcert.core.errors import RackcertError
from rackcert.core.spec import Spec


class HypervisorError(RackcertError):
    """The hypervisor could not do what the roll asked; one line naming the object and call."""


class VSphereHypervisor:
    """VMs and hosts through pyVmomi; maintenance windows carry rackcert's mark
    (provision/maintenance_mark.py) so any re-run can tell them from an operator's."""

    def __init__(self, spec: Spec, *, boot_timeout: float | None = None, wait_guest: bool = True):
        self.spec = spec
        self._si: Any = None
        self._lock = threading.Lock()
        self.boot_timeout = boot_timeout or float(spec.network.management.boot_timeout_s)
        self.wait_guest = wait_guest
        # The spec names hosts its own way; vCenter knows them by address (hosts[].address).
        self._vc_name = {h.name: h.address for h in spec.hosts}
        self._spec_name = {h.address: h.name for h in spec.hosts}
        self._refs: dict[tuple[str, str], Any] = {}

    @property
    def si(self) -> Any:
        with self._lock:
            if self._si is None:
                from provision.session import open_session

                self._si = open_session(self.spec)
            return self._si

    def _find(self, kind: str, name: str) -> Any:
        """The VM or host of that name; every name is read in one PropertyCollector call
        the first time (walking a view's objects costs a round trip each, which grew with
        the rack: 34 calls a lookup on 16 hosts x 2 VMs) and kept, a moref being stable."""
        if kind == "host":
            name = self._vc_name.get(name, name)
        with self._lock:
            ref = self._refs.get((kind, name))
        if ref is None:
            self._index()
            with self._lock:
                ref = self._refs.get((kind, name))
        if ref is None:
            raise HypervisorError(f"{name}: no such {'VM' if kind == 'vm' else 'host'} in vCenter")
        return ref

    def _index(self) -> None:
        from pyVmomi import vim

        from provision.viewspec import view_filter_spec

        content = self.si.content
        kinds = {vim.VirtualMachine: "vm", vim.HostSystem: "host"}
        view = content.viewManager.CreateContainerView(content.rootFolder, list(kinds), True)
        try:
            spec = view_filter_spec(view, {t: ["name"] for t in kinds})
            found = {}
            for obj in content.propertyCollector.RetrieveContents([spec]):
                for prop in obj.propSet:
                    kind = "vm" if isinstance(obj.obj, vim.VirtualMachine) else "host"
                    found[(kind, str(prop.val))] = obj.obj
        finally:
            view.DestroyView()
        with self._lock:
            self._refs.update(found)

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        from pyVmomi import vmodl

        try:
            return fn()
        except vmodl.MethodFault as fault:
            text = getattr(fault, "msg", "") or type(fault).__name__
            raise HypervisorError(f"{what}: {text}") from None

    def power_state(self, vm: str) -> str:
        return str(self._find("vm", vm).runtime.powerState)

    def shutdown_guest(self, vm: str) -> None:
        ref = self._find("vm", vm)
        self._call(f"{vm}: ShutdownGuest", ref.ShutdownGuest)

    def power_off(self, vm: str) -> None:
        from provision.vsphere_ops import wait_task

        ref = self._find("vm", vm)
        wait_task(self._call(f"{vm}: PowerOff", ref.PowerOffVM_Task), f"{vm}: power off")

    def power_on(self, vm: str) -> None:
        """Power the VM on, then wait for it the way provision waits for a new clone
        (provision.lifecycle.wait_up: Tools reporting the node's address, or SSH there, as
        network.management.wait_for says, within boot_timeout_s)."""
        from provision.lifecycle import wait_up
        from provision.vsphere_ops import power_on_vm
        from rackcert.core.stage_records import ActionRecord

        ref = self._find("vm", vm)
        if str(ref.runtime.powerState) != "poweredOn":
            self._call(f"{vm}: PowerOn", lambda: power_on_vm(ref, vm))
        node = next((v for v in self.spec.vms if v.name == vm), None)
        if node is None or not self.wait_guest:
            return
        mode = self.spec.network.management.wait_for
        action = ActionRecord(
            kind="vm.wait",
            target=vm,
            change=f"wait up to {self.boot_timeout:.0f} s for the guest ({mode})",
            reason="the roll configures and validates the node once it has booted",
            params={
                "address": node.address,
                "port": node.ssh_port,
                "timeout_s": self.boot_timeout,
                "wait_for": mode,
            },
        )
        state = self._call(
            f"{vm}: wait for the guest",
            lambda: wait_up(self.si, action, ref._moId, lambda *_: None),
        )
        if not state.get("answered"):
            what = {"ssh": "no SSH", "tools": "no Tools report", "any": "no Tools or SSH"}[mode]
            raise HypervisorError(
                f"{vm}: powered on, {what} at {node.address} after {self.boot_timeout:.0f} s"
                f" (power {state.get('power_state', '?')})"
            )

    def enter_maintenance(self, host: str, run: str) -> None:
        from provision import maintenance_mark
        from provision.vsphere_ops import wait_task

        ref = self._find("host", host)
        if ref.runtime.inMaintenanceMode:
            return
        key = maintenance_mark.field_key(self.si, create=True)
        assert key is not None
        maintenance_mark.mark(self.si, ref, key, f"rackcert upgrade {run}")
        task = self._call(
            f"{host}: EnterMaintenanceMode", lambda: ref.EnterMaintenanceMode_Task(timeout=0)
        )
        wait_task(task, f"{host}: enter maintenance mode")

    def exit_maintenance(self, host: str) -> None:
        from provision import maintenance_mark
        from provision.vsphere_ops import wait_task

        ref = self._find("host", host)
        if ref.runtime.inMaintenanceMode:
            task = self._call(
                f"{host}: ExitMaintenanceMode", lambda: ref.ExitMaintenanceMode_Task(timeout=0)
            )
            wait_task(task, f"{host}: exit maintenance mode")
        key = maintenance_mark.field_key(self.si, create=False)
        if key is not None:
            maintenance_mark.clear(self.si, ref, key)

    def marked_hosts(self) -> list[str]:
        from provision import maintenance_mark

        key = maintenance_mark.field_key(self.si, create=False)
        if key is None:
            return []
        marked = maintenance_mark.marked_hosts(self.si, key)
        return sorted(self._spec_name.get(name, name) for _, name, _, _ in marked)

    def boot_time(self, host: str) -> str:
        ref = self._find("host", host)
        if str(ref.runtime.connectionState) != "connected" or ref.runtime.bootTime is None:
            raise HypervisorError(f"{host}: not connected")
        return str(ref.runtime.bootTime.isoformat())

    def reboot(self, host: str) -> None:
        from provision.vsphere_ops import wait_task

        ref = self._find("host", host)
        task = self._call(f"{host}: RebootHost", lambda: ref.RebootHost_Task(force=False))
        wait_task(task, f"{host}: reboot")
