"""Hypervisor checks: what provision's discovery saw in vCenter, against spec + placement.

They read a recorded `rackcert.observed.Inventory` (provision.json
`data.observed_after`, else plan.json `data.observed`), never vCenter itself:
validate judges evidence that is already on record, and `validation` never
imports `provision`. The expectations come from the spec and
`rackcert.placement.place(spec)`, the same function the planner uses.

    >>> results = hypervisor_results(spec, inventory)
    >>> [r.id for r in results if r.status == "fail"]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rackcert.observed import Inventory, ObservedHost, ObservedVm
from rackcert.placement import VmPlacement, place
from rackcert.results import CheckResult, Severity, Status
from rackcert.runs import RunDir, list_runs
from rackcert.spec import GpuMode, NicMode, Spec
from validation.checks import Outcome, failed, passed, skipped


@dataclass(frozen=True)
class HvCheck:
    id: str
    scope: str  # "host" or "vm"
    func: Callable[..., Outcome]
    fix: str
    summary: str
    severity: Severity = Severity.error


HV_CHECKS: list[HvCheck] = []
# Results that are not one check function: the host or VM is missing, or nothing recorded.
HV_EXTRA_IDS = ("hv.host.present", "hv.vm.present", "hv.discovery")


def hv_ids() -> list[str]:
    return [c.id for c in HV_CHECKS] + list(HV_EXTRA_IDS)


def hv_check(check_id: str, scope: str, severity: Severity = Severity.error):
    """Register a hypervisor check; its docstring's `Fix:` line is the hint."""

    def register(func: Callable[..., Outcome]) -> Callable[..., Outcome]:
        doc = (func.__doc__ or "").splitlines()
        fix = next((ln.strip()[4:].strip() for ln in doc if ln.strip().startswith("Fix:")), "")
        summary = doc[0].strip() if doc else check_id
        HV_CHECKS.append(HvCheck(check_id, scope, func, fix, summary, severity))
        return func

    return register


def mmio_size_gb(gpu_memory_gb: list[int], override: int | None = None) -> int:
    """pciPassthru.64bitMMIOSizeGB: the VM's GPU memory rounded up to a power of two, doubled.

    VMware/NVIDIA guidance (DESIGN.md): 1 x 80 GB -> 256, 2 x 80 GB -> 512, 2 x 40 GB -> 256.
    """
    if override:
        return override
    total = sum(gpu_memory_gb)
    if total <= 0:
        return 0
    power = 1
    while power < total:
        power *= 2
    return power * 2


def _pci(value: str | None) -> str:
    text = (value or "").strip().lower()
    return text if text.count(":") == 2 else f"0000:{text}" if text else ""


def _extra(vm: ObservedVm, key: str) -> str | None:
    wanted = key.lower()
    return next((v for k, v in vm.extra_config.items() if k.lower() == wanted), None)


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
    def template(self):
        return self.spec.template(self.spec.vms[self._index].template)

    @property
    def _index(self) -> int:
        return next(i for i, v in enumerate(self.spec.vms) if v.name == self.placement.vm)


@hv_check("hv.host.ats", "host")
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
                "this ESXi build has no VMkernel.Boot.atsSupport: run `esxcli system settings"
                " kernel set -s atsSupport -v TRUE` on the host and reboot it",
            )
        return failed("unknown", "in effect", "discovery did not read the ATS setting")
    if not seen:
        return failed("disabled", "in effect", "ATS is off")
    # A boot option runs from the next boot: configured with a reboot still pending
    # (summary.rebootRequired) is not the runtime value yet.
    if host.reboot_required:
        return failed("configured, reboot pending", "in effect", "ATS is not in effect yet")
    return passed("in effect", "in effect")


def _passthrough(ctx: HostCtx, pcis: list[str], what: str) -> Outcome:
    if not pcis:
        return skipped(f"no {what} of this host is given to a VM")
    devices = {_pci(d.id): d for d in ctx.observed.pci_devices}
    bad, seen = [], []
    for pci in pcis:
        dev = devices.get(_pci(pci))
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


@hv_check("hv.host.gpu_passthrough", "host")
def host_gpu_passthrough(ctx: HostCtx) -> Outcome:
    """Every host GPU given to a VM is in passthrough and active (passthruActive).

    Fix: rackcert provision (UpdatePassthruConfig), then reboot the host if it is not active.
    """
    return _passthrough(ctx, ctx.gpus, "GPU")


@hv_check("hv.host.nic_passthrough", "host")
def host_nic_passthrough(ctx: HostCtx) -> Outcome:
    """Every NIC given to a VM in passthrough mode is in passthrough and active on the host.

    Fix: rackcert provision (UpdatePassthruConfig on the NIC), then reboot the host.
    """
    return _passthrough(ctx, ctx.nics, "passthrough NIC")


@hv_check("hv.vm.devices", "vm")
def vm_devices(ctx: VmCtx) -> Outcome:
    """The VM's passthrough devices are exactly the GPUs placement gives it (plus its NIC).

    Fix: rackcert provision --power-cycle (reconfigures the VM's VirtualPCIPassthrough devices).
    """
    tmpl = ctx.template
    if tmpl.gpu_mode is GpuMode.vgpu:
        vgpus = [d.vgpu for d in ctx.observed.passthrough if d.backing == "vgpu"]
        want = [tmpl.vgpu_profile] * tmpl.gpus
        if sorted(map(str, vgpus)) != sorted(map(str, want)):
            return failed(", ".join(map(str, vgpus)) or "none", ", ".join(map(str, want)), "vGPUs")
        return passed(", ".join(map(str, vgpus)), ", ".join(map(str, want)))
    want = sorted(_pci(p) for p in ctx.placement.gpus)
    if tmpl.nic is NicMode.passthrough and ctx.placement.nic:
        want.append(_pci(ctx.placement.nic))
    seen = sorted(_pci(d.id) for d in ctx.observed.passthrough if d.id)
    dynamic = [d for d in ctx.observed.passthrough if d.backing == "dynamic"]
    if sorted(want) != seen and not (dynamic and len(ctx.observed.passthrough) == len(want)):
        return failed(", ".join(seen) or "none", ", ".join(sorted(want)) or "none", "devices")
    return passed(", ".join(seen) or "none", ", ".join(sorted(want)) or "none")


@hv_check("hv.vm.mmio", "vm")
def vm_mmio(ctx: VmCtx) -> Outcome:
    """use64bitMMIO is TRUE and 64bitMMIOSizeGB is the VM's GPU memory, power of two, doubled.

    Fix: rackcert provision --power-cycle (sets pciPassthru.64bitMMIOSizeGB; spec: mmio_size_gb).
    """
    if not ctx.placement.gpus:
        return skipped("the VM has no GPUs")
    profile = ctx.spec.host_profile(ctx.placement.host)
    memory = [g.memory_gb for g in profile.gpus if g.pci in ctx.placement.gpus]
    want = mmio_size_gb(memory, ctx.template.mmio_size_gb)
    use = (_extra(ctx.observed, "pciPassthru.use64bitMMIO") or "").upper()
    size = _extra(ctx.observed, "pciPassthru.64bitMMIOSizeGB")
    observed = f"use64bitMMIO={use or 'unset'} 64bitMMIOSizeGB={size or 'unset'}"
    expected = f"use64bitMMIO=TRUE 64bitMMIOSizeGB={want}"
    if use != "TRUE" or size != str(want):
        return failed(observed, expected, "MMIO settings differ")
    return passed(observed, expected)


@hv_check("hv.vm.p2p", "vm")
def vm_p2p(ctx: VmCtx) -> Outcome:
    """A VM with 2+ GPUs has pciPassthru.allowP2P and pciPassthru.RelaxACSforP2P set to true.

    Fix: rackcert provision --power-cycle (sets both P2P keys in the VM's extraConfig).
    """
    if len(ctx.placement.gpus) < 2:
        return skipped("fewer than 2 GPUs: no P2P between them")
    keys = ("pciPassthru.allowP2P", "pciPassthru.RelaxACSforP2P")
    seen = {k: (_extra(ctx.observed, k) or "unset") for k in keys}
    observed = " ".join(f"{k}={v}" for k, v in seen.items())
    expected = " ".join(f"{k}=true" for k in keys)
    if any(v.lower() != "true" for v in seen.values()):
        return failed(observed, expected, "P2P flags missing")
    return passed(observed, expected)


@hv_check("hv.vm.reservation", "vm")
def vm_reservation(ctx: VmCtx) -> Outcome:
    """All the VM's memory is reserved (memoryReservationLockedToMax), as passthrough requires.

    Fix: rackcert provision --power-cycle (sets memoryReservationLockedToMax).
    """
    if ctx.observed.memory_reservation_locked:
        return passed("locked to max", "locked to max")
    return failed("not locked", "locked to max", "memory not fully reserved")


@hv_check("hv.vm.numa", "vm")
def vm_numa(ctx: VmCtx) -> Outcome:
    """numa.nodeAffinity pins the VM to the NUMA node of its GPUs (template numa_affinity).

    Fix: rackcert provision --power-cycle (sets numa.nodeAffinity to the GPUs' node).
    """
    if not ctx.template.numa_affinity or ctx.placement.numa is None:
        return skipped("no NUMA affinity asked for (or no GPUs)")
    seen = _extra(ctx.observed, "numa.nodeAffinity")
    want = str(ctx.placement.numa)
    if (seen or "").strip() != want:
        return failed(seen or "unset", want, "NUMA affinity differs")
    return passed(seen, want)


@hv_check("hv.vm.firmware", "vm", Severity.warning)
def vm_firmware(ctx: VmCtx) -> Outcome:
    """The VM boots EFI (large BARs need it).

    Fix: recreate the VM with EFI firmware (rackcert provision creates VMs with EFI).
    """
    if ctx.observed.firmware.lower() == "efi":
        return passed("efi", "efi")
    return failed(ctx.observed.firmware or "unknown", "efi", "not EFI")


def _result(check: HvCheck, node: str, outcome: Outcome) -> CheckResult:
    failing = outcome.status in (Status.failed, Status.error)
    return CheckResult(
        id=check.id,
        node=node,
        severity=check.severity,
        status=outcome.status,
        observed=outcome.observed,
        expected=outcome.expected,
        fix=check.fix if failing else "",
        reason=outcome.reason,
    )


def _run(check: HvCheck, node: str, ctx: object) -> CheckResult:
    try:
        return _result(check, node, check.func(ctx))
    except Exception as exc:  # noqa: BLE001 - a broken check is an error result
        return _result(check, node, Outcome(Status.error, reason=f"check crashed: {exc}"))


def hypervisor_results(
    spec: Spec, inventory: Inventory, nodes: list[str] | None = None
) -> list[CheckResult]:
    """Every hypervisor check for the spec's hosts and VMs (or those hosting `nodes`)."""
    placements = place(spec)
    if nodes:
        placements = [p for p in placements if p.vm in nodes]
    hosts = [h for h in spec.hosts if not nodes or any(p.host == h.name for p in placements)]
    out: list[CheckResult] = []
    for host in hosts:
        # vCenter names a host by the address it was added with (as the planner matches it).
        observed = inventory.host(host.address) or inventory.host(host.name)
        if observed is None:
            out.append(_missing("hv.host.present", host.name, "host not in vCenter's inventory"))
            continue
        mine = [p for p in placements if p.host == host.name]
        nic_vms = [
            p
            for p in mine
            if spec.template(spec.vms[_vm_index(spec, p.vm)].template).nic is NicMode.passthrough
        ]
        ctx = HostCtx(
            spec,
            host.name,
            observed,
            gpus=sorted({g for p in mine for g in p.gpus}),
            nics=sorted({p.nic for p in nic_vms if p.nic}),
        )
        out += [_run(c, host.name, ctx) for c in HV_CHECKS if c.scope == "host"]
    for p in placements:
        vm = inventory.vm(p.vm)
        if vm is None:
            out.append(_missing("hv.vm.present", p.vm, "VM not in vCenter's inventory"))
            continue
        out += [_run(c, p.vm, VmCtx(spec, p, vm)) for c in HV_CHECKS if c.scope == "vm"]
    return out


def _vm_index(spec: Spec, name: str) -> int:
    return next(i for i, v in enumerate(spec.vms) if v.name == name)


def _missing(check_id: str, node: str, reason: str) -> CheckResult:
    return CheckResult(
        id=check_id,
        node=node,
        status=Status.failed,
        observed="absent",
        expected="present",
        reason=reason,
        fix="rackcert provision creates it; check the spec's names against vCenter",
    )


def discovery_record(
    rack: str, run: RunDir | None, runs_root: Path
) -> tuple[Inventory, str] | None:
    """The newest recorded discovery: provision.json observed_after, else plan.json observed.

    Looks in `run` first, then in earlier runs of the rack, newest first.
    """
    candidates: list[RunDir] = [run] if run else []
    candidates += [RunDir(r.path) for r in reversed(list_runs(runs_root, rack))]
    for cand in candidates:
        for stage, key in (("provision", "observed_after"), ("plan", "observed")):
            record = cand.read_stage(stage)
            data: Any = (record or {}).get("data") or {}
            if isinstance(data, dict) and data.get(key):
                return Inventory.model_validate(data[key]), str(cand.path / f"{stage}.json")
    return None
