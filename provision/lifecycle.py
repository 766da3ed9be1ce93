"""A new VM's life in provision: clone the template, customize, power on, wait until it answers.

The planner's `vm.clone`, `vm.customize`, `vm.power_on` and `vm.wait` actions
are carried out here (apply.py's VM_STEPS table dispatches to them):

- clone: `CloneVM_Task` of the template into the datacenter's VM folder with a
  RelocateSpec naming the planned host, the host's cluster resource pool and the
  spec's datastore, powered off and not as a template, with a deterministic
  `config.instanceUuid` (uuid5 of the rack's and the VM's names). Before it, the VM
  is looked up by name and by that instance UUID (`SearchIndex.FindByUuid`), so one
  that a killed run made, or that was renamed since, is adopted (renamed back), never
  cloned twice;
- customize: one `ReconfigVM_Task` with what rackcert computes (vCPUs, memory
  and its full reservation, EFI, passthrough devices, MMIO/P2P/NUMA extraConfig),
  the cloud-init guestinfo keys, the disk grown and the management NIC on its
  port group;
- power on: `PowerOnVM_Task`; vCenter's own checks (a device held by another
  VM, an inactive passthrough device) fault the task, which stops the run;
- wait: bounded, with progress, until VMware Tools reports the spec's address
  as `guest.ipAddress` or SSH answers there (`network.management.wait_for`); while
  apply runs, every VM's power state and address come from one watch that vCenter
  pushes changes to (provision/guestwatch.py), not from a read per VM per poll.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

from provision.vsphere_ops import (
    ApplyError,
    Event,
    datacenter_of,
    extra_config,
    group_specs,
    hardware_specs,
    host_ref,
    named,
    passthrough_specs,
    vm_ref,
    wait_task,
)
from rackcert.core.stage_records import ActionRecord as Action


def clone(si: Any, action: Action, on_event: Event) -> tuple[str, str]:
    """CloneVM_Task onto the planned host, pool and datastore; (the VM's moid, a note).

    A VM this chain would make that exists already (by name, or by its instance UUID under
    another name) is adopted instead: renamed to its spec name if need be, not cloned again.
    """
    from pyVmomi import vim

    p = action.params
    host = host_ref(si, p["host_moid"])
    template = vm_ref(si, p["template_moid"])
    datastore = named(host.datastore, p["datastore"], "datastore", action.host)
    compute = host.parent
    folder = datacenter_of(compute).vmFolder
    found = made_before(si, folder, p, host, action.host)
    if found is not None:
        return str(found._moId), adopt(found, p["name"], p.get("instance_uuid"), on_event)
    relocate = vim.vm.RelocateSpec(host=host, pool=compute.resourcePool, datastore=datastore)
    spec = vim.vm.CloneSpec(location=relocate, powerOn=False, template=False)
    if p.get("instance_uuid"):
        spec.config = vim.vm.ConfigSpec(instanceUuid=p["instance_uuid"])
    task = template.CloneVM_Task(folder=folder, name=p["name"], spec=spec)
    try:
        made = wait_task(task, f"clone {p['template']} to VM {p['name']}", on_event)
    except ApplyError as exc:
        if not isinstance(exc.fault, vim.fault.DuplicateName):
            raise
        # A clone an interrupted run started has finished since the plan was made: that VM
        # is the one this chain makes; customize it rather than leave it an orphan.
        found = half_made(si, folder, p["name"], host)
        if found is None:
            raise
        return str(found._moId), "adopted: an interrupted run's clone finished meanwhile"
    return str(made._moId), ""


def made_before(si: Any, folder: Any, p: dict[str, Any], host: Any, where: str) -> Any:
    """The VM an earlier run made for this chain: by name on the planned host, or by the
    instance UUID rackcert gives it (FindByUuid with vmSearch and instanceUuid, vSphere API
    reference, SearchIndex). None when there is none; an ApplyError when the UUID's VM is
    not one this chain may take (a template, or on another host)."""
    found = half_made(si, folder, p["name"], host)
    if found is not None or not p.get("instance_uuid"):
        return found
    index = si.content.searchIndex
    found = index.FindByUuid(uuid=p["instance_uuid"], vmSearch=True, instanceUuid=True)
    if found is None:
        return None
    if found.config.template or found.runtime.host != host:
        raise ApplyError(
            f"{where}: VM {found.name} has the instance UUID rackcert gives {p['name']}"
            f" ({p['instance_uuid']}) but is not a VM on this host: move or remove it, then"
            " re-run provision"
        )
    return found


def half_made(si: Any, folder: Any, name: str, host: Any) -> Any:
    """The VM `name` in `folder` when an earlier, interrupted run cloned it onto `host`."""
    from pyVmomi import vim

    found = si.content.searchIndex.FindChild(entity=folder, name=name)
    if not isinstance(found, vim.VirtualMachine) or found.config.template:
        return None
    return found if found.runtime.host == host else None


def adopt(vm: Any, name: str, instance: str | None, on_event: Event) -> str:
    """Take over a VM an earlier run made, under its spec name; the note for the record."""
    seen = vm.name
    if seen == name:
        return "adopted: made by an earlier run, not cloned again"
    wait_task(vm.Rename_Task(newName=name), f"rename VM {seen} to {name}", on_event)
    return f"adopted VM {seen} (instance UUID {instance}), renamed to {name}: not cloned again"


def customize(si: Any, action: Action, vm_moid: str, on_event: Event) -> None:
    """One ReconfigVM_Task: CPUs, locked memory, passthrough, extraConfig, guestinfo, disk, NIC."""
    from pyVmomi import vim

    want = action.params["desired"]
    vm = vm_ref(si, vm_moid)
    host = host_ref(si, action.params["host_moid"])
    changes = passthrough_specs(host, action.host, action.params["add_devices"])
    changes += hardware_specs(vm, host, action)
    config = vim.vm.ConfigSpec(
        numCPUs=want["num_cpus"],
        memoryMB=want["memory_mb"],
        firmware="efi",
        memoryReservationLockedToMax=True,
        extraConfig=extra_config(action.params["extra_config"]),
        deviceChange=changes,
    )
    if action.params.get("add_group"):  # vSphere 8: the VM's device group, whole, in this request
        config.deviceGroups, members = group_specs(host, action.host, action.params["device_group"])
        config.deviceChange = [*changes, *members]
    wait_task(vm.ReconfigVM_Task(spec=config), f"customize VM {want['name']}", on_event)


def ssh_answers(address: str, port: int, timeout: float = 2.0) -> bool:
    """True when something at address:port speaks SSH (its banner starts with SSH-)."""
    try:
        with socket.create_connection((address, port), timeout=timeout) as conn:
            conn.settimeout(timeout)
            return conn.recv(4).startswith(b"SSH-")
    except OSError:
        return False


# Seconds between two looks at a booting VM (provision.pace.Pace.poll_s sets it).
WAIT_POLL_S = {"interval": 1.0}


def wait_up(
    si: Any,
    action: Action,
    vm_moid: str,
    on_event: Event,
    *,
    clock: Callable[[], float] = time.monotonic,
    interval: float | None = None,
) -> dict[str, Any]:
    """Wait (bounded) for Tools' guest.ipAddress == address or SSH there; the VM's state.

    Returns {"address", "answered": "ssh" | "tools" | None, "seconds", "power_state",
    "guest_ip"}; answered None means the timeout passed (the caller reports it).
    """
    p = action.params
    vm = vm_ref(si, vm_moid)
    started = clock()
    deadline = started + p["timeout_s"]
    mode = p["wait_for"]
    state: dict[str, Any] = {"address": p["address"], "answered": None}
    pause = interval if interval is not None else WAIT_POLL_S["interval"]
    watch = _watch_for(vm)
    since = -1
    looked = False
    while True:
        # The first look does not wait (the VM may have answered already); later ones wait
        # on the watch, up to `pause`, for the VM's next change (its first, when the watch
        # has not reported it yet), so an answer is seen when vCenter reports it.
        seen = watch.look(vm_moid, since, pause if looked else 0) if watch else None
        looked = True
        if seen is None:  # no watch, it failed, or it has not reported the VM: read the VM
            power = str(vm.runtime.powerState)
            guest_ip = vm.guest.ipAddress if vm.guest else None
        else:
            since = seen["n"]
            power, guest_ip = str(seen.get("runtime.powerState")), seen.get("guest.ipAddress")
        state |= {"power_state": power, "guest_ip": guest_ip or ""}
        if mode in ("any", "ssh") and ssh_answers(p["address"], p["port"]):
            state["answered"] = "ssh"
        elif mode in ("any", "tools") and guest_ip == p["address"]:
            state["answered"] = "tools"
        elapsed = clock() - started
        state["seconds"] = round(elapsed, 1)
        if state["answered"] or power != "poweredOn" or clock() > deadline:
            return state
        on_event(
            "progress",
            action,
            f"{action.target}: waiting for {p['address']}:{p['port']}"
            f" ({elapsed:.0f} s of {p['timeout_s']} s)",
        )
        if watch is None or watch.failed is not None:  # nothing to wait on: poll
            time.sleep(pause)


def _watch_for(vm: Any) -> Any:
    """apply's guest watch following `vm` (provision/guestwatch.py), or None: poll it."""
    from provision.guestwatch import ACTIVE

    watch = ACTIVE["watch"]
    if watch is None or watch.si._stub is not vm._stub or not watch.follow(vm):
        return None
    return watch
