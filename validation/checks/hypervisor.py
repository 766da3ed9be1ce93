"""Hypervisor checks: ESXi hosts and VMs as provision's recorded discovery saw them.

They register through the same `@check` registry as the guest checks, with the
scope `host` (an ESXi host: `HostCtx`), `vm` (a VM in vCenter: `VmCtx`) or
`rack`. The expectations come from the spec, `rackcert.core.placement.place(spec)`
(the planner's placement) and `rackcert.core.vsphere_rules` (the planner's
extraConfig): what provision writes is what these checks expect.
`validation.hypervisor_results` builds the contexts and runs them.

    @check("hv.vm.reservation", scope="vm")
    def vm_reservation(ctx: VmCtx) -> Outcome:
        '''All the VM's memory is reserved (memoryReservationLockedToMax).

        Fix: rackcert provision --power-cycle (sets memoryReservationLockedToMax).
        '''
"""

from __future__ import annotations

from dataclasses import dataclass

from rackcert.core.observed import ObservedHost, ObservedVm
from rackcert.core.placement import VmPlacement
from rackcert.core.results import Severity, Status
from rackcert.core.spec import GpuMode, NicMode, Spec, VmTemplate
from rackcert.core.vsphere_rules import (
    ATS_OPTION,
    ESXCLI_ATS,
    MMIO_ENABLE,
    MMIO_SIZE,
    NUMA_AFFINITY,
    P2P_KEYS,
    wanted_extra_config,
)
from validation.checks import Outcome, check, failed, passed, skipped


@dataclass(frozen=True)
class HostCtx:
    spec: Spec
    name: str
    observed: ObservedHost
    gpus: list[str]  # host GPUs the placed VMs use
    nics: list[str]  # host NICs given to VMs in passthrough


@dataclass(frozen=True)
class VmCtx:
    spec: Spec
    placement: VmPlacement
    observed: ObservedVm

    @property
    def template(self) -> VmTemplate:
        vm = next(v for v in self.spec.vms if v.name == self.placement.vm)
        return self.spec.template(vm.template)

    def wanted(self) -> dict[str, str]:
        """The extraConfig provision writes for this VM (rackcert.core.vsphere_rules)."""
        profile = self.spec.host_profile(self.placement.host)
        return wanted_extra_config(self.template, self.placement, profile)

    def extra(self, key: str) -> str | None:
        """The VM's extraConfig value; vSphere compares keys without case."""
        wanted = key.lower()
        return next((v for k, v in self.observed.extra_config.items() if k.lower() == wanted), None)


def pci_address(value: str | None) -> str:
    """A PCI address with its domain, lower-case (17:00.0 -> 0000:17:00.0)."""
    text = (value or "").strip().lower()
    return text if text.count(":") == 2 else f"0000:{text}" if text else ""


def _same(seen: str | None, want: str) -> bool:
    """extraConfig values as vSphere reads them: booleans without case, the rest exactly."""
    return (seen or "").strip().lower() == want.lower()


# -- presence: reported when they do not pass; every other check of a host or VM needs it -----
@check("hv.discovery", scope="rack", severity=Severity.warning)
def discovery_recorded(source: str | None) -> Outcome:
    """A discovery of the rack is on record (provision.json or plan.json) for these checks.

    Fix: run `rackcert plan` or `rackcert provision` first.
    """
    if source is None:
        return skipped(
            "no provision.json or plan.json recorded for this rack: run"
            " `rackcert plan` or `rackcert provision` first"
        )
    return passed(source)


@check("hv.host.present", scope="host")
def host_present(observed: ObservedHost | None) -> Outcome:
    """The spec's ESXi host is in vCenter's inventory (by its address, else its name).

    Fix: add the host to vCenter, or correct the spec's hosts[].address to the name vCenter uses.
    """
    if observed is None:
        return failed("absent", "present", "host not in vCenter's inventory")
    return passed("present", "present")


@check("hv.vm.present", scope="vm")
def vm_present(observed: ObservedVm | None) -> Outcome:
    """The spec's VM is in vCenter's inventory.

    Fix: rackcert provision creates it; check the spec's names against vCenter.
    """
    if observed is None:
        return failed("absent", "present", "VM not in vCenter's inventory")
    return passed("present", "present")


# -- hosts ------------------------------------------------------------------------------------
@check("hv.host.ats", scope="host")
def host_ats(ctx: HostCtx) -> Outcome:
    """ATS is in effect on the ESXi host (boot option atsSupport, since a boot), for GPU P2P.

    Fix: rackcert provision (sets atsSupport in maintenance mode and reboots the host).
    """
    host = ctx.observed
    seen = host.ats_enabled
    if seen is None:
        if host.ats_option_type == "":
            return failed(
                "no such option",
                "in effect",
                f"this ESXi build has no {ATS_OPTION}: run `{ESXCLI_ATS}` on the host and"
                " reboot it",
            )
        return failed("unknown", "in effect", "discovery did not read the ATS setting")
    # The judge is ATS as the host runs it: esxcli's Runtime column (discovery's ats_runtime),
    # or, with no reboot pending, the configured value. A boot option runs from the next boot.
    runtime = host.ats_runtime
    source = host.ats_runtime_source
    if runtime is True:
        note = "" if not source.startswith("esxcli") else f" ({source})"
        if not seen:
            return passed(f"in effect until the next boot{note}, configured off", "in effect")
        return passed(f"in effect{note}", "in effect")
    if not seen:
        return failed("disabled", "in effect", "ATS is off")
    if runtime is False:
        return failed(
            f"configured, reboot pending ({source})", "in effect", "ATS is not in effect yet"
        )
    # No esxcli answer while a reboot is pending (summary.rebootRequired): the configured
    # value is not taken as the running one.
    if host.reboot_required:
        return failed(
            f"configured, reboot pending ({source or 'inferred'})",
            "in effect",
            "ATS is not in effect yet",
        )
    return passed("in effect", "in effect")


def _passthrough(ctx: HostCtx, pcis: list[str], what: str) -> Outcome:
    if not pcis:
        return skipped(f"no {what} of this host is given to a VM")
    devices = {pci_address(d.id): d for d in ctx.observed.pci_devices}
    bad, seen = [], []
    for pci in pcis:
        dev = devices.get(pci_address(pci))
        if dev is None:
            bad.append(f"{pci} not found")
            continue
        state = "active" if dev.passthru_active else "enabled" if dev.passthru_enabled else "off"
        seen.append(f"{pci} {state}")
        if not dev.passthru_active:
            bad.append(f"{pci} {state}")
    observed = ", ".join(seen) or "none found"
    if bad:
        return failed(observed, "passthrough active", "; ".join(bad))
    return passed(observed, "passthrough active")


@check("hv.host.gpu_passthrough", scope="host")
def host_gpu_passthrough(ctx: HostCtx) -> Outcome:
    """Every host GPU given to a VM is in passthrough and active (passthruActive).

    Fix: rackcert provision (UpdatePassthruConfig), then reboot the host if it is not active.
    """
    return _passthrough(ctx, ctx.gpus, "GPU")


@check("hv.host.nic_passthrough", scope="host")
def host_nic_passthrough(ctx: HostCtx) -> Outcome:
    """Every NIC given to a VM in passthrough mode is in passthrough and active on the host.

    Fix: rackcert provision (UpdatePassthruConfig on the NIC), then reboot the host.
    """
    return _passthrough(ctx, ctx.nics, "passthrough NIC")


def _esxcli_unknown(ctx: HostCtx, expected: str) -> Outcome | None:
    """A host that did not answer esxcli: unknown (an error, never a pass).

    A record whose discovery did not ask (an older rackcert, `discover` without esxcli) is
    skipped with what to run: it says nothing of the host.
    """
    facts = ctx.observed.esxcli
    if facts is None:
        return skipped("this discovery did not ask the host through esxcli: re-run rackcert plan")
    if not facts.answered:
        return Outcome(Status.error, "unknown", expected, facts.error or "no esxcli answer")
    return None


@check("hv.host.esxcli_passthrough", scope="host")
def host_esxcli_passthrough(ctx: HostCtx) -> Outcome:
    """esxcli on the host lists every GPU and NIC given to a VM as passthrough-enabled.

    Fix: `esxcli hardware pci pcipassthru set -d <pci> -e true` (or rackcert provision), reboot.
    """
    wanted = sorted(set(ctx.gpus) | set(ctx.nics))
    if not wanted:
        return skipped("no GPU or NIC of this host is given to a VM")
    unknown = _esxcli_unknown(ctx, "passthrough enabled")
    if unknown is not None:
        return unknown
    assert ctx.observed.esxcli is not None
    seen = {pci_address(k): v for k, v in ctx.observed.esxcli.passthru.items()}
    states = []
    for pci in wanted:
        state = seen.get(pci_address(pci))
        states.append(
            f"{pci} {'not listed' if state is None else 'enabled' if state else 'disabled'}"
        )
    bad = [s for s in states if not s.endswith(" enabled")]
    if bad:
        return failed(", ".join(states), "passthrough enabled", "; ".join(bad))
    return passed(", ".join(states), "passthrough enabled")


@check("hv.host.vaai_ats", scope="host", severity=Severity.info)
def host_vaai_ats(ctx: HostCtx) -> Outcome:
    """The VAAI ATS status of the host's storage devices, as esxcli reports it, is on record.

    Fix: `esxcli storage core device vaai status get` on the host (shared VMFS wants ATS).
    """
    unknown = _esxcli_unknown(ctx, "ATS status of every device")
    if unknown is not None:
        return unknown
    assert ctx.observed.esxcli is not None
    devices = ctx.observed.esxcli.vaai
    if not devices:
        return skipped("the host reports no storage device")
    seen = ", ".join(f"{d.device} ATS {d.ats_status or 'unknown'}" for d in devices)
    unread = [d.device for d in devices if d.ats_status not in ("supported", "unsupported")]
    if unread:
        return failed(seen, "ATS status of every device", f"status unknown: {', '.join(unread)}")
    return passed(seen, "ATS status of every device")


# -- VMs --------------------------------------------------------------------------------------
@check("hv.vm.devices", scope="vm")
def vm_devices(ctx: VmCtx) -> Outcome:
    """The VM's passthrough devices are exactly the GPUs placement gives it (plus its NIC).

    Fix: rackcert provision --power-cycle (reconfigures the VM's VirtualPCIPassthrough devices).
    """
    tmpl = ctx.template
    if tmpl.gpu_mode is GpuMode.vgpu:
        vgpus = sorted(str(d.vgpu) for d in ctx.observed.passthrough if d.backing == "vgpu")
        profiles = [str(tmpl.vgpu_profile)] * tmpl.gpus
        if vgpus != profiles:
            return failed(", ".join(vgpus) or "none", ", ".join(profiles), "vGPUs")
        return passed(", ".join(vgpus), ", ".join(profiles))
    want = sorted(pci_address(p) for p in ctx.placement.gpus)
    if tmpl.nic is NicMode.passthrough and ctx.placement.nic:
        want.append(pci_address(ctx.placement.nic))
    seen = sorted(pci_address(d.id) for d in ctx.observed.passthrough if d.id)
    dynamic = [d for d in ctx.observed.passthrough if d.backing == "dynamic"]
    if sorted(want) != seen and not (dynamic and len(ctx.observed.passthrough) == len(want)):
        return failed(", ".join(seen) or "none", ", ".join(sorted(want)) or "none", "devices")
    return passed(", ".join(seen) or "none", ", ".join(sorted(want)) or "none")


@check("hv.vm.mmio", scope="vm")
def vm_mmio(ctx: VmCtx) -> Outcome:
    """use64bitMMIO is TRUE and 64bitMMIOSizeGB is the VM's GPU memory, power of two, doubled.

    Fix: rackcert provision --power-cycle (sets pciPassthru.64bitMMIOSizeGB; spec: mmio_size_gb).
    """
    wanted = ctx.wanted()
    if MMIO_SIZE not in wanted:
        why = "vGPUs" if ctx.placement.gpus else "no GPUs"
        return skipped(f"the VM has {why}: provision sets no 64-bit MMIO window")
    use, size = ctx.extra(MMIO_ENABLE), ctx.extra(MMIO_SIZE)
    enable, window = (k.removeprefix("pciPassthru.") for k in (MMIO_ENABLE, MMIO_SIZE))
    observed = f"{enable}={(use or 'unset').upper()} {window}={size or 'unset'}"
    expected = f"{enable}={wanted[MMIO_ENABLE]} {window}={wanted[MMIO_SIZE]}"
    if not _same(use, wanted[MMIO_ENABLE]) or (size or "").strip() != wanted[MMIO_SIZE]:
        return failed(observed, expected, "MMIO settings differ")
    return passed(observed, expected)


@check("hv.vm.p2p", scope="vm")
def vm_p2p(ctx: VmCtx) -> Outcome:
    """A VM with 2+ P2P devices (GPUs, passthrough NIC) has allowP2P and RelaxACSforP2P true.

    Fix: rackcert provision --power-cycle (sets both P2P keys in the VM's extraConfig).
    """
    wanted = ctx.wanted()
    if not all(k in wanted for k in P2P_KEYS):
        return skipped("fewer than 2 passthrough devices: no P2P between them")
    seen = {k: (ctx.extra(k) or "unset") for k in P2P_KEYS}
    observed = " ".join(f"{k}={v}" for k, v in seen.items())
    expected = " ".join(f"{k}={wanted[k]}" for k in P2P_KEYS)
    if not all(_same(seen[k], wanted[k]) for k in P2P_KEYS):
        return failed(observed, expected, "P2P flags missing")
    return passed(observed, expected)


@check("hv.vm.reservation", scope="vm")
def vm_reservation(ctx: VmCtx) -> Outcome:
    """All the VM's memory is reserved (memoryReservationLockedToMax), as passthrough requires.

    Fix: rackcert provision --power-cycle (sets memoryReservationLockedToMax).
    """
    if ctx.observed.memory_reservation_locked:
        return passed("locked to max", "locked to max")
    return failed("not locked", "locked to max", "memory not fully reserved")


@check("hv.vm.numa", scope="vm")
def vm_numa(ctx: VmCtx) -> Outcome:
    """numa.nodeAffinity pins the VM to the NUMA node of its GPUs (template numa_affinity).

    Fix: rackcert provision --power-cycle (sets numa.nodeAffinity to the GPUs' node).
    """
    want = ctx.wanted().get(NUMA_AFFINITY)
    if want is None:
        return skipped("no NUMA affinity asked for (or no GPUs)")
    seen = ctx.extra(NUMA_AFFINITY)
    if (seen or "").strip() != want:
        return failed(seen or "unset", want, "NUMA affinity differs")
    return passed(seen, want)


@check("hv.vm.firmware", scope="vm", severity=Severity.warning)
def vm_firmware(ctx: VmCtx) -> Outcome:
    """The VM boots EFI (large BARs need it).

    Fix: recreate the VM with EFI firmware (rackcert provision creates VMs with EFI).
    """
    if ctx.observed.firmware.lower() == "efi":
        return passed("efi", "efi")
    return failed(ctx.observed.firmware or "unknown", "efi", "not EFI")
