"""What must change so the rack matches its spec: a pure, deterministic diff.

`plan(spec, inventory)` compares the spec (through `rackcert.core.placement.place`,
which decides which VM gets which GPUs) with what discovery saw, and returns
ordered actions: hosts first, in spec order (ATS on, devices to passthrough,
reboot so both take effect), then VMs in spec order (create or reconfigure).
Each action says what it changes and why. No vCenter access happens here; a
provisioned rack plans nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from provision import guestinfo
from provision.vm_identity import instance_uuid
from provision.vmsettings import (
    DeviceWant,
    device_diff,
    nic_ports,
    power_conflicts,
    wanted_devices,
)
from rackcert.core.device_groups import describe, wanted_group
from rackcert.core.errors import RackcertError
from rackcert.core.observed import Inventory, ObservedHost, ObservedVm
from rackcert.core.pci import is_nvidia_gpu
from rackcert.core.placement import VmPlacement, place
from rackcert.core.spec import GpuMode, Spec
from rackcert.core.stage_records import ActionRecord
from rackcert.core.vsphere_rules import ATS_OPTION, ESXCLI_ATS, wanted_extra_config

HOST_KINDS = (
    "host.gpus",
    "host.vgpu_manager",
    "host.ats",
    "host.passthrough",
    "host.graphics",
    "host.reboot",
)
# A new VM: clone the template, customize the clone, power it on, wait until it answers.
LIFECYCLE_KINDS = ("vm.clone", "vm.customize", "vm.power_on", "vm.wait")
# Findings the planner reports but never acts on: their actions are always blocked.
# host.vgpu_manager is applied where the spec names a depot (blocked otherwise).
REPORT_ONLY_KINDS = ("host.gpus", "vm.disk", "vm.relocate", "vm.firmware")


class PlanError(RackcertError):
    """The rack in vCenter cannot be matched to the spec (a host or device is missing)."""

    exit_code = 2


# One change: `target` (host or VM), `change` (what), `reason` (why). The planner builds the
# record type itself, so what is planned, applied and recorded is one shape.
Action = ActionRecord


def _find_host(spec_host: Any, inventory: Inventory) -> ObservedHost:
    found = inventory.host(spec_host.address) or inventory.host(spec_host.name)
    if found is None:
        raise PlanError(
            f"host {spec_host.name} ({spec_host.address}) is not in vCenter {inventory.vcenter}:"
            " add it to vCenter or fix hosts[].address in the spec"
        )
    return found


def _powered_on(host: ObservedHost, inventory: Inventory) -> list[dict[str, str]]:
    """The host's powered-on workload VMs (agent VMs an extension manages are not workload)."""
    vms = [
        v
        for v in inventory.vms
        if v.host == host.name and v.power_state == "poweredOn" and not v.managed_by
    ]
    return [{"name": v.name, "moid": v.moid} for v in sorted(vms, key=lambda v: v.name)]


def left_alone(inventory: Inventory) -> list[dict[str, str]]:
    """VMs that an extension manages (vCLS: com.vmware.vim.eam), which rackcert never touches.

    vCenter 7.0.3 runs up to three vCLS agent VMs per cluster and powers them on
    again when they are powered off; maintenance mode takes care of them. They
    are never counted as workload, powered off or waited for.
    """
    return [
        {
            "name": v.name,
            "host": v.host or "",
            "managed_by": v.managed_by,
            "reason": f"managed by vCenter extension {v.managed_by}: left alone",
        }
        for v in inventory.vms
        if v.managed_by
    ]


def _passthrough_ids(spec: Spec, placements: list[VmPlacement], host_name: str) -> dict[str, str]:
    """PCI id -> VM that needs it in passthrough, for one spec host."""
    templates = {v.name: spec.template(v.template) for v in spec.vms}
    ports = nic_ports(placements, templates, host_name)
    out: dict[str, str] = {}
    for p in placements:
        if p.host != host_name:
            continue
        if templates[p.vm].gpu_mode is GpuMode.passthrough:
            for pci in p.gpus:
                out.setdefault(pci, p.vm)
        if p.vm in ports:
            out.setdefault(ports[p.vm], p.vm)
    return dict(sorted(out.items()))


def _no_gpu_action(host: ObservedHost) -> Action | None:
    """One blocked line for a host that reports no passthrough-capable GPU at all.

    A vCenter without GPU hosts (a stock simulator, a host whose GPUs are not
    seen) cannot be provisioned; saying so once per host beats a plan of
    actions that name devices the host does not have.
    """
    gpus = [
        d for d in host.pci_devices if is_nvidia_gpu(d.vendor_id, d.class_id) and d.passthru_capable
    ]
    if gpus:
        return None
    return Action(
        kind="host.gpus",
        target=host.name,
        change="no passthrough-capable GPU on this host",
        reason=f"{host.name} reports {len(host.pci_devices)} PCI device(s), no NVIDIA GPU"
        " capable of passthrough; its VMs are not planned",
        host=host.name,
        blocked="check the host's hardware (lspci on ESXi) and the spec's hosts[].address",
    )


def _host_actions(
    spec: Spec, placements: list[VmPlacement], spec_host: Any, inventory: Inventory
) -> list[Action]:
    host = _find_host(spec_host, inventory)
    if any(p.host == spec_host.name and p.gpus for p in placements):
        missing = _no_gpu_action(host)
        if missing is not None:
            return [missing]
    running = _powered_on(host, inventory)
    actions: list[Action] = []
    ats = _ats_action(host)
    ats_change = ats is not None and ats.blocked is None
    if ats is not None:
        actions.append(ats)
    ats_boot = _ats_boot(host, ats_change)
    pending_boot = bool(ats_boot)
    ats_change = ats_boot == "ATS"
    enable: list[str] = []
    activate: list[str] = []
    for pci, vm in _passthrough_ids(spec, placements, spec_host.name).items():
        dev = host.device(pci)
        if dev is None:
            raise PlanError(
                f"host {host.name} has no PCI device {pci} (wanted for VM {vm}); fix the"
                f" hardware profile {spec_host.profile!r} or the host's hardware"
            )
        if not dev.passthru_capable:
            raise PlanError(f"host {host.name}: PCI device {pci} is not passthrough capable")
        if not dev.passthru_enabled:
            enable.append(pci)
        elif not dev.passthru_active:
            activate.append(pci)
    manager = _vgpu_manager_action(spec, placements, spec_host, host)
    if manager is not None:
        actions.append(manager)
    # NVIDIA's vGPU guide: the host reboots after the manager VIB is installed.
    manager_boot = (manager is not None and not manager.blocked) or (
        _vgpu_manager_boot(host) and bool(_vgpu_vms(spec, placements, spec_host))
    )
    pending_boot = pending_boot or manager_boot
    graphics = _graphics_action(spec, placements, spec_host, host)
    if graphics is not None:
        actions.append(graphics)
        pending_boot = True
    # ESXi 7.0+ rebinds devices at once when it can (HostPciPassthruConfig.applyNow,
    # HostCapability.deviceRebindWithoutRebootSupported); only then is no reboot needed.
    now = host.rebind_without_reboot
    if enable:
        actions.append(
            Action(
                kind="host.passthrough",
                target=host.name,
                change="passthrough on for " + ", ".join(enable),
                reason="DirectPath I/O for the VMs' GPUs and NIC ports (HostPciPassthruSystem); "
                + (
                    "applies at once (the host rebinds devices without a reboot)"
                    if now
                    else "active after the next boot (the host cannot rebind without one)"
                ),
                host=host.name,
                params={"enable": enable, "apply_now": now},
            )
        )
    waiting = [*activate] if now else [*enable, *activate]
    if waiting or pending_boot:
        ats_why = "ATS"
        if host.ats_runtime_source.startswith("esxcli"):
            ats_why = f"ATS ({host.ats_runtime_source})"
        why = ats_why if ats_change else "pending boot options"
        if graphics is not None and not ats_change:
            why = "the default graphics type"
        if manager_boot and not ats_change:
            also = " and the default graphics type" if graphics is not None else ""
            why = f"the NVIDIA vGPU manager VIB{also}"
        if waiting:
            why = (f"{ats_why} and " if ats_change else "") + "passthrough of " + ", ".join(waiting)
        actions.append(
            Action(
                kind="host.reboot",
                target=host.name,
                change="maintenance mode, reboot, exit maintenance mode",
                reason=f"{why}: in effect only after a reboot",
                host=host.name,
                params={"passthrough": waiting},
            )
        )
    for action in actions:
        action.params["host_moid"] = host.moid
        action.params["powered_on_vms"] = running
    if running:
        for action in actions:
            action.needs_power_cycle = True
            action.reason += (
                f"; host has powered-on VM(s) {', '.join(v['name'] for v in running)}:"
                " needs --power-cycle"
            )
    return actions


def _vgpu_manager_action(
    spec: Spec, placements: list[VmPlacement], spec_host: Any, host: ObservedHost
) -> Action | None:
    """vGPU VMs need the NVIDIA vGPU manager on their host: installed from the spec's depot.

    NVIDIA's vGPU guide for vSphere ("Installing and Configuring the NVIDIA Virtual GPU
    Manager for VMware vSphere"): the host enters maintenance mode, `esxcli software vib
    install -d <bundle>` installs the manager VIB, the host reboots; only then does it offer
    vGPU profiles (config.sharedPassthruGpuTypes). Without host_software.vgpu_manager the
    action is blocked with what to install. A host whose esxcli already lists the VIB while a
    reboot is pending needs only the reboot (`_vgpu_manager_boot`).
    """
    wanted: dict[str, list[str]] = {}
    for vm, tmpl in _vgpu_vms(spec, placements, spec_host):
        if tmpl.vgpu_profile not in host.vgpu_types:
            wanted.setdefault(tmpl.vgpu_profile or "?", []).append(vm)
    if not wanted:
        return None
    profiles = ", ".join(sorted(wanted))
    vms = ", ".join(v for names in wanted.values() for v in names)
    offered = ", ".join(host.vgpu_types) or "none"
    reason = (
        f"vGPU VM(s) {vms} need the NVIDIA vGPU manager VIB of the guest driver's branch"
        " on this host (NVIDIA vGPU guide for vSphere)"
    )
    if _vgpu_manager_boot(host):
        return None  # installed, loaded at the pending reboot: _host_actions plans it
    source = spec.host_software.vgpu_manager
    installed = host.esxcli.vgpu_manager() if host.esxcli and host.esxcli.answered else None
    blocked = None
    if installed is not None:
        blocked = (
            f"the host runs {installed.name} {installed.version} and still offers none of"
            f" {profiles}: check the profile names against the host's GPUs"
        )
    elif source is None:
        blocked = (
            "install the NVIDIA vGPU manager VIB on the host (esxcli software vib install),"
            " reboot it, and re-run provision; or name the bundle in"
            " host_software.vgpu_manager.depot"
        )
    change = f"vGPU profile(s) {profiles} not offered (the host offers {offered})"
    if blocked is None and source is not None:
        change += f": install the NVIDIA vGPU manager from {source.depot}"
    return Action(
        kind="host.vgpu_manager",
        target=host.name,
        change=change,
        reason=reason,
        host=host.name,
        params={"depot": source.depot} if blocked is None and source is not None else {},
        blocked=blocked,
    )


def _vgpu_manager_boot(host: ObservedHost) -> bool:
    """The manager VIB is installed (esxcli lists it) but loads only at the pending reboot."""
    facts = host.esxcli
    installed = facts is not None and facts.answered and facts.vgpu_manager() is not None
    return installed and host.reboot_required and not host.vgpu_types


def _vgpu_vms(spec: Spec, placements: list[VmPlacement], spec_host: Any) -> list[tuple[str, Any]]:
    """(VM name, its template) of each VM placed on this host that takes vGPUs."""
    out = []
    for p in placements:
        if p.host != spec_host.name or not p.gpus:
            continue
        tmpl = spec.template(next(v for v in spec.vms if v.name == p.vm).template)
        if tmpl.gpu_mode is GpuMode.vgpu:
            out.append((p.vm, tmpl))
    return out


def _graphics_action(
    spec: Spec, placements: list[VmPlacement], spec_host: Any, host: ObservedHost
) -> Action | None:
    """vGPU VMs power on only when the host's default graphics type is sharedDirect.

    NVIDIA's vGPU guide for vSphere: Host Graphics set to "Shared Direct"
    (HostGraphicsManager.UpdateGraphicsConfig), in effect after a reboot.
    """
    vgpu = [vm for vm, _tmpl in _vgpu_vms(spec, placements, spec_host)]
    if not vgpu or host.graphics_type == "sharedDirect":
        return None
    return Action(
        kind="host.graphics",
        target=host.name,
        change=f"default graphics type {host.graphics_type or '?'} -> sharedDirect",
        reason=f"vGPU VM(s) {', '.join(vgpu)} power on only on a Shared Direct host (NVIDIA vGPU"
        " guide); takes effect at the next boot",
        host=host.name,
    )


def _ats_boot(host: ObservedHost, ats_change: bool) -> str:
    """What a reboot would bring into effect for ATS: "ATS", "pending boot options" or "".

    A reboot is planned when ATS as the host runs it (esxcli's Runtime, discovery's
    ats_runtime) is not what the spec wants, never only because summary.rebootRequired is
    true: an operator's same-value option write or a VIB install sets it too. When a host
    with a reboot pending did not answer esxcli, the API's inference stays: the pending boot
    options (ATS among them) are not in effect until it reboots.
    """
    if host.ats_runtime is not None:
        return "" if host.ats_runtime else "ATS"
    if ats_change:
        return "ATS"
    return "pending boot options" if host.reboot_required else ""


def _ats_action(host: ObservedHost) -> Action | None:
    """ATS on, through the advanced option when this ESXi build has it; else blocked.

    Whether VMkernel.Boot.atsSupport exists, and its type, is read from the host
    (discovery: config.optionDef). Without it there is nothing the API can set,
    so the action is blocked with the esxcli command, and no reboot is planned
    for it (a reboot would not change anything, on every run).
    """
    if host.ats_enabled is True:
        return None
    reason = (
        "ATS lets the GPUs and the ConnectX-6 do P2P (GPUDirect) without the IOMMU"
        " in the way (Dell design, step 1); takes effect at the next boot"
    )
    if not host.ats_option_type:
        return Action(
            kind="host.ats",
            target=host.name,
            change=f"{ATS_OPTION}: not an advanced option on this host",
            reason=reason,
            host=host.name,
            blocked=f"this ESXi build has no {ATS_OPTION}: run `{ESXCLI_ATS}`"
            " on the host, then reboot it",
        )
    return Action(
        kind="host.ats",
        target=host.name,
        change=f"{ATS_OPTION} {'false' if host.ats_enabled is False else 'unset'} -> true",
        reason=reason,
        host=host.name,
        params={"option_type": host.ats_option_type},
    )


def _where(spec: Spec, placement: VmPlacement, host: ObservedHost, pair_note: str) -> str:
    """Where placement puts a VM, in words: host, GPUs, and the device group it takes whole.

    An HGX VM shows its Fabric Manager partition and SXM modules (the PCI addresses follow
    from the profile), so an operator reads host, partition and modules in the plan.
    """
    group = wanted_group(spec, placement)
    gpus = ", ".join(placement.gpus) or "no GPU"
    if group is not None and group.partition is not None:
        return f"on {host.name} with {describe(group)}"
    where = f"on {host.name} with {gpus}" + (pair_note if placement.nvlink_pair else "")
    return where + (f" as {describe(group)}" if group is not None else "")


def _group_params(
    spec: Spec, placement: VmPlacement, host: ObservedHost, devices: list[DeviceWant]
) -> dict[str, Any]:
    """`device_group` for the action's params when the VM takes one (none otherwise): the
    group, and the devices its members become (apply adds them in one request)."""
    group = wanted_group(spec, placement)
    if group is None:
        return {}
    members = [_device_params(d, host) for d in devices if d.role == "gpu"]
    return {"device_group": {**group.as_params(), "devices": members}}


def _split_group(spec: Spec, placement: VmPlacement, devices: list[DeviceWant]) -> list[DeviceWant]:
    """The devices added one by one: all of them, or without the GPUs a device group brings."""
    if wanted_group(spec, placement) is None:
        return devices
    return [d for d in devices if d.role != "gpu"]


def _group_change(group_params: dict[str, Any], observed: ObservedVm) -> str:
    """What the VM lacks of its device group, in words ("" when it holds it whole)."""
    group = group_params.get("device_group")
    if not group:
        return ""
    held = observed.group_members(group["vendor_name"])
    if len(held) == len(group["gpus"]):
        return ""
    what = f"{len(group['gpus'])} x vGPU {group['vgpu']}" if group["vgpu"] else "passthrough GPUs"
    return f"take device group {group['name']} ({what}) in one request"


def _unwanted_members(group_params: dict[str, Any], observed: ObservedVm) -> list[int]:
    """Keys of the members of groups the VM holds but should not: removed all together."""
    wanted = (group_params.get("device_group") or {}).get("vendor_name")
    names = {n for n in observed.device_groups.values() if n != wanted}
    return sorted(d.key for n in names for d in observed.group_members(n))


def _vm_action(
    spec: Spec,
    vm_spec: Any,
    placement: VmPlacement,
    nic_port: str | None,
    host: ObservedHost,
    observed: ObservedVm | None,
    keys: Sequence[str] = (),
) -> Action | None:
    tmpl = spec.template(vm_spec.template)
    profile = spec.host_profile(placement.host)
    all_devices = wanted_devices(tmpl, placement, nic_port)
    group_params = _group_params(spec, placement, host, all_devices)
    devices = _split_group(spec, placement, all_devices)
    extra = wanted_extra_config(tmpl, placement, profile)
    identity = guestinfo.guestinfo(spec, vm_spec, keys) if tmpl.source else {}
    memory_mb = tmpl.memory_gb * 1024
    desired = _desired_vm(vm_spec.name, tmpl, host, extra, devices)
    where = _where(spec, placement, host, " (NVLink-bridged pair)")
    if observed is None and tmpl.source is None:
        return Action(
            kind="vm.create",
            target=vm_spec.name,
            change=f"create: {tmpl.vcpus} vCPU, {tmpl.memory_gb} GB locked, EFI, passthrough "
            f"{', '.join(d.id or d.vgpu or '?' for d in devices) or 'none'}; {_fmt_extra(extra)}",
            reason=f"VM {vm_spec.name} of template {tmpl.name} does not exist;"
            f" placement puts it {where}",
            host=host.name,
            params={"desired": desired, "host_moid": host.moid, **group_params},
            blocked="vm_templates[].source is not set: an empty VM has no disk and cannot boot;"
            " name the template to clone",
        )
    if observed is None:
        return None  # cloned: _clone_actions plans it
    if not observed.disks:
        return Action(
            kind="vm.disk",
            target=vm_spec.name,
            change="VM exists without a disk",
            reason="a VM without a disk cannot boot; rackcert clones VMs but does not replace one:"
            " delete it (provision then clones it from the template) or attach its disk",
            host=host.name,
            blocked="VM has no disk",
        )
    changes: list[str] = []
    if observed.host and observed.host != host.name:
        return Action(
            kind="vm.relocate",
            target=vm_spec.name,
            change=f"VM is on {observed.host}, placement wants {host.name}",
            reason="its GPUs are on the other host; migrate it (not automated: the VM owns local"
            " passthrough devices)",
            host=host.name,
            blocked="rackcert does not migrate VMs",
        )
    if observed.num_cpus != tmpl.vcpus:
        changes.append(f"vCPU {observed.num_cpus} -> {tmpl.vcpus}")
    if observed.memory_mb != memory_mb:
        changes.append(f"memory {observed.memory_mb} -> {memory_mb} MB")
    if not observed.memory_reservation_locked:
        changes.append("memory reservation locked to max")
    extra_changes = {
        k: v for k, v in extra.items() if observed.extra_config.get(k, "").lower() != v.lower()
    }
    for key, value in extra_changes.items():
        changes.append(f"{key}={value}")
    ungrouped = [d for d in observed.passthrough if d.group_key is None]
    add, removed = device_diff(devices, ungrouped)
    group_change = _group_change(group_params, observed)
    if group_change:
        changes.append(group_change)
    stale = _unwanted_members(group_params, observed)
    if stale:
        changes.append(
            "remove device group(s) "
            + ", ".join(
                sorted(
                    set(observed.device_groups.values())
                    - {(group_params.get("device_group") or {}).get("name")}
                )
            )
            + " whole"
        )
    remove = [d.key for d in removed]
    for d in add:
        changes.append(f"add passthrough {d.id or d.vgpu}")
    if removed:
        changes.append("remove passthrough " + ", ".join(d.id or d.vgpu or "?" for d in removed))
    hardware = _hardware_changes(tmpl, observed, host)
    changes += hardware.pop("changes")
    identity_changes = {k: v for k, v in identity.items() if observed.extra_config.get(k) != v}
    if identity_changes:
        changes.append(guestinfo_summary(spec, vm_spec, keys))
    if not changes:
        return None
    running = observed.power_state == "poweredOn"
    reason = f"VM {vm_spec.name} differs from template {tmpl.name} {where}"
    if running:
        reason += "; VM is powered on: needs --power-cycle"
    return Action(
        kind="vm.reconfigure",
        target=vm_spec.name,
        change="; ".join(changes),
        reason=reason,
        host=host.name,
        params={
            "desired": desired,
            "host_moid": host.moid,
            "vm_moid": observed.moid,
            "extra_config": extra_changes | identity_changes,
            "add_devices": [_device_params(d, host) for d in add],
            "remove_device_keys": remove + stale,
            **hardware,
            **group_params,
            "add_group": bool(group_change),
        },
        needs_power_cycle=running,
    )


def _firmware_action(
    vm_name: str, observed: ObservedVm | None, host: ObservedHost
) -> Action | None:
    """An existing VM that boots BIOS stays BIOS: a blocked action says why, like relocation.

    Switching firmware under an installed guest leaves it unbootable (its boot
    loader is on an MBR, not in an EFI system partition), so rackcert never
    does it; large-BAR GPUs want EFI, so the VM is to be recreated.
    """
    if observed is None or observed.firmware in ("efi", ""):
        return None
    return Action(
        kind="vm.firmware",
        target=vm_name,
        change=f"firmware {observed.firmware} -> efi",
        reason="GPUs with large BARs (64-bit MMIO) want EFI firmware; the VM was made with"
        f" {observed.firmware}",
        host=host.name,
        blocked="rackcert never switches an existing VM from BIOS to EFI (its installed guest"
        " would not boot): recreate the VM (delete it, re-run provision)",
    )


def _device_params(d: DeviceWant, host: ObservedHost) -> dict[str, Any]:
    out: dict[str, Any] = {"backing": d.backing, "role": d.role}
    if d.backing == "vgpu":
        out["vgpu"] = d.vgpu
        return out
    dev = host.device(d.id or "")
    out["id"] = d.id
    out["vendor_id"] = dev.vendor_id if dev else None
    out["device_id"] = dev.device_id if dev else None
    return out


def _desired_vm(
    name: str, tmpl: Any, host: ObservedHost, extra: dict[str, str], devices: list[DeviceWant]
) -> dict[str, Any]:
    """The VM settings rackcert wants, one shape for a created, cloned or reconfigured VM."""
    return {
        "name": name,
        "host": host.name,
        "num_cpus": tmpl.vcpus,
        "memory_mb": tmpl.memory_gb * 1024,
        "firmware": "efi",
        "memory_reservation_locked": True,
        "guest_id": tmpl.guest_id,
        "hardware_version": tmpl.hardware_version,
        "extra_config": extra,
        "devices": [_device_params(d, host) for d in devices],
    }


def _fmt_extra(extra: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in extra.items()) or "no extraConfig"


def plan(spec: Spec, inventory: Inventory, *, authorized_keys: Sequence[str] = ()) -> list[Action]:
    """Ordered actions that take the rack in `inventory` to the spec; [] when it is there.

    `authorized_keys` are the public keys the cloned VMs' cloud-init user-data
    authorizes (`guestinfo.read_authorized_keys(spec)`); the CLI reads them.
    """
    placements = place(spec)
    actions: list[Action] = []
    for spec_host in spec.hosts:
        actions += _host_actions(spec, placements, spec_host, inventory)
    templates = {v.name: spec.template(v.template) for v in spec.vms}
    ports: dict[str, str] = {}
    for spec_host in spec.hosts:
        ports |= nic_ports(placements, templates, spec_host.name)
    by_vm = {p.vm: p for p in placements}
    created: list[str] = []
    no_gpus = {a.host for a in actions if a.kind == "host.gpus"}
    for vm_spec in spec.vms:
        placement = by_vm[vm_spec.name]
        host = _find_host(spec.host(placement.host), inventory)
        if host.name in no_gpus:
            continue
        observed = inventory.vm(vm_spec.name)
        if observed is None and spec.template(vm_spec.template).source:
            actions += _clone_actions(
                spec, vm_spec, placement, ports.get(vm_spec.name), host, inventory, authorized_keys
            )
            created.append(vm_spec.name)
            continue
        action = _vm_action(
            spec, vm_spec, placement, ports.get(vm_spec.name), host, observed, authorized_keys
        )
        if action is not None:
            actions.append(action)
        firmware = _firmware_action(vm_spec.name, observed, host)
        # A VM that is relocated elsewhere or blocked for its missing disk is not changed here.
        if firmware is not None and (
            action is None or action.kind not in ("vm.relocate", "vm.disk")
        ):
            actions.append(firmware)
    return actions + _power_actions(spec, placements, inventory, actions, created)


def require_keys(actions: list[Action], keys: Sequence[str]) -> None:
    """A clone whose cloud-init user-data authorizes no key could never be reached."""
    clones = [a.target for a in actions if a.kind == "vm.clone"]
    if clones and not keys:
        raise PlanError(
            f"VM {clones[0]}: no SSH public key for its cloud-init user-data (guest.ssh:"
            " public_key_file, or key_file + '.pub'): a clone would accept no key"
        )


# -- cloned VMs: clone, customize, power on, wait ---------------------------------------------
def guestinfo_summary(spec: Spec, vm_spec: Any, keys: Sequence[str]) -> str:
    """The cloud-init identity in words (the values themselves are long base64)."""
    mgmt = spec.network.management
    via = f" via {mgmt.gateway}" if mgmt.gateway else ""
    return (
        f"guestinfo (cloud-init): hostname {vm_spec.name}, {vm_spec.address}/{mgmt.prefix}{via},"
        f" {len(keys)} authorized key(s)"
    )


def _template_of(spec: Spec, tmpl: Any, inventory: Inventory, host: ObservedHost) -> ObservedVm:
    """The template a VM is cloned from, checked before anything is created."""
    source = tmpl.source
    found = inventory.template(source)
    if found is None:
        vm = inventory.vm(source)
        what = "a VM, not marked as template" if vm else "not in vCenter"
        raise PlanError(
            f"vm_templates {tmpl.name}: source template {source!r} is {what}"
            f" ({inventory.vcenter}); import it and mark it as template, or fix"
            " vm_templates[].source: nothing was changed"
        )
    if found.firmware != "efi":
        raise PlanError(
            f"vm_templates {tmpl.name}: template {source!r} boots with {found.firmware or '?'}"
            " firmware, but the VMs need EFI (64-bit MMIO for passthrough GPUs) and firmware"
            " cannot be switched under an installed guest: use an EFI template"
        )
    if not found.disks:
        raise PlanError(
            f"vm_templates {tmpl.name}: template {source!r} has no disk: a clone could not boot"
        )
    datastore = tmpl.datastore or found.disks[0].datastore
    if datastore not in host.datastores:
        raise PlanError(
            f"vm_templates {tmpl.name}: datastore {datastore!r} is not mounted on host {host.name}"
            f" (it has {', '.join(host.datastores) or 'none'}): fix vm_templates[].datastore"
        )
    if tmpl.network and tmpl.network not in host.networks:
        raise PlanError(
            f"vm_templates {tmpl.name}: port group {tmpl.network!r} is not on host {host.name}"
            f" (it has {', '.join(host.networks) or 'none'}): fix vm_templates[].network"
        )
    return found


def _hardware_changes(tmpl: Any, vm: ObservedVm, host: ObservedHost) -> dict[str, Any]:
    """Disk to grow and management NIC to attach: {"changes": [...], "disk": ..., "nic": ...}."""
    out: dict[str, Any] = {"changes": [], "disk": None, "nic": None}
    if tmpl.disk_gb and vm.disks and vm.disks[0].capacity_gb < tmpl.disk_gb:
        have = vm.disks[0].capacity_gb
        out["changes"].append(f"disk {have:g} -> {tmpl.disk_gb} GB")
        out["disk"] = {"capacity_kb": tmpl.disk_gb * 1024 * 1024}
    vmxnet3 = [n for n in vm.nics if n.type == "vmxnet3"]
    if tmpl.network and not any(n.network == tmpl.network for n in vmxnet3):
        where = f"{vmxnet3[0].network or '?'} -> " if vmxnet3 else "add vmxnet3 on "
        out["changes"].append(f"management NIC {where}{tmpl.network}")
        out["nic"] = {"network": tmpl.network, "edit": bool(vmxnet3)}
    return out


def _clone_actions(
    spec: Spec,
    vm_spec: Any,
    placement: VmPlacement,
    nic_port: str | None,
    host: ObservedHost,
    inventory: Inventory,
    keys: Sequence[str],
) -> list[Action]:
    """Clone the template onto the planned host and datastore, then customize the clone."""
    tmpl = spec.template(vm_spec.template)
    source = _template_of(spec, tmpl, inventory, host)
    datastore = tmpl.datastore or source.disks[0].datastore
    profile = spec.host_profile(placement.host)
    all_devices = wanted_devices(tmpl, placement, nic_port)
    group_params = _group_params(spec, placement, host, all_devices)
    devices = _split_group(spec, placement, all_devices)
    extra = wanted_extra_config(tmpl, placement, profile)
    identity = guestinfo.guestinfo(spec, vm_spec, keys)
    hardware = _hardware_changes(tmpl, source, host)
    desired = _desired_vm(vm_spec.name, tmpl, host, extra, devices)
    where = _where(spec, placement, host, " (NVLink pair)")
    passthrough = ", ".join(d.id or d.vgpu or "?" for d in devices) or "none"
    customize = [
        f"{tmpl.vcpus} vCPU, {tmpl.memory_gb} GB locked, EFI, passthrough {passthrough}",
        *hardware["changes"],
        _fmt_extra(extra),
        guestinfo_summary(spec, vm_spec, keys),
    ]
    common: dict[str, Any] = {"host": host.name}
    return [
        Action(
            kind="vm.clone",
            target=vm_spec.name,
            change=f"clone template {source.name} to {host.name}, datastore {datastore}",
            reason=f"VM {vm_spec.name} of template {tmpl.name} does not exist;"
            f" placement puts it {where}",
            params={
                "template_moid": source.moid,
                "template": source.name,
                "host_moid": host.moid,
                "datastore": datastore,
                "name": vm_spec.name,
                "instance_uuid": instance_uuid(spec.metadata.name, vm_spec.name),
            },
            **common,
        ),
        Action(
            kind="vm.customize",
            target=vm_spec.name,
            change="; ".join(customize),
            reason=f"the clone has the template's hardware ({source.num_cpus} vCPU,"
            f" {source.memory_mb // 1024} GB, {source.disks[0].capacity_gb:g} GB disk);"
            " cloud-init reads its identity from guestinfo at first boot",
            params={
                "desired": desired,
                "host_moid": host.moid,
                "vm_moid": None,
                "extra_config": extra | identity,
                "add_devices": desired["devices"],
                "remove_device_keys": [],
                "disk": hardware["disk"],
                "nic": hardware["nic"],
                **group_params,
                "add_group": bool(group_params),
            },
            **common,
        ),
    ]


def _power_actions(
    spec: Spec,
    placements: list[VmPlacement],
    inventory: Inventory,
    actions: list[Action],
    created: list[str],
) -> list[Action]:
    """Power on the spec's VMs that are off (created now or found off), then wait for each.

    A VM sharing a passthrough device with an earlier VM of the spec that runs is
    left off (vSphere powers on one holder of a device at a time); `power_conflicts`
    says which, and the CLI prints it. A VM with a blocked action is not started.
    """
    blocked = {a.target for a in actions if a.blocked}
    conflicts = power_conflicts(spec, placements, inventory)
    mgmt = spec.network.management
    on: list[Action] = []
    waits: list[Action] = []
    for vm_spec in spec.vms:
        observed = inventory.vm(vm_spec.name)
        if vm_spec.name in blocked or vm_spec.name in conflicts:
            continue
        if vm_spec.name not in created and (
            observed is None or observed.power_state != "poweredOff"
        ):
            continue
        spec_host = spec.host(next(p.host for p in placements if p.vm == vm_spec.name))
        host = _find_host(spec_host, inventory).name
        new = vm_spec.name in created
        on.append(
            Action(
                kind="vm.power_on",
                target=vm_spec.name,
                change="power on",
                reason="new clone: cloud-init applies hostname, address and key at first boot"
                if new
                else "VM is powered off; the rack's nodes run",
                host=host,
                params={"vm_moid": observed.moid if observed else None},
            )
        )
        ssh = f"SSH on {vm_spec.address}:{vm_spec.ssh_port}"
        tools = f"VMware Tools to report {vm_spec.address}"
        what = {"any": f"{tools} or {ssh}", "ssh": ssh, "tools": tools}[mgmt.wait_for]
        waits.append(
            Action(
                kind="vm.wait",
                target=vm_spec.name,
                change=f"wait up to {mgmt.boot_timeout_s} s for {what}",
                reason="configure reaches the VM over SSH at vms[].address once it has booted",
                host=host,
                params={
                    "vm_moid": observed.moid if observed else None,
                    "address": vm_spec.address,
                    "port": vm_spec.ssh_port,
                    "timeout_s": mgmt.boot_timeout_s,
                    "wait_for": mgmt.wait_for,
                },
            )
        )
    return on + waits
