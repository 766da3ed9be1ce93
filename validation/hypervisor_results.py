"""Run the hypervisor checks over what provision's discovery saw in vCenter.

The checks themselves live in `validation.checks.hypervisor` and register
through the one `@check` registry with scope `host`, `vm` or `rack`; this
module builds what each judges and runs them. They read a recorded
`rackcert.core.observed.Inventory` (provision.json `data.observed_after`, else
plan.json `data.observed`), never vCenter itself: validate judges evidence that
is already on record, and `validation` never imports `provision`. The
expectations come from the spec, `rackcert.core.placement.place(spec)` and
`rackcert.core.vsphere_rules`, the same functions the planner uses.

    >>> results = hypervisor_results(spec, inventory)
    >>> [r.id for r in results if r.status == "fail"]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rackcert.core.observed import Inventory
from rackcert.core.placement import place
from rackcert.core.results import CheckResult
from rackcert.core.runs import RunDir, run_paths, summarize
from rackcert.core.spec import NicMode, Spec
from validation.checks import HYPERVISOR, REGISTRY, CheckDef, ids, load_all, run_on
from validation.checks.hypervisor import HostCtx, VmCtx


def hv_ids() -> list[str]:
    """The ids of every hypervisor check (scopes host, vm and rack)."""
    return ids(HYPERVISOR)


def _scoped(scope: str) -> list[CheckDef]:
    """The checks of one scope, presence first (the others need the host or VM)."""
    return [d for d in load_all().values() if d.scope == scope and not d.id.endswith(".present")]


def no_discovery(rack: str) -> CheckResult:
    """hv.discovery when no discovery is on record: skipped, with what to run."""
    load_all()
    return run_on(REGISTRY["hv.discovery"], rack, None)


def hypervisor_results(
    spec: Spec, inventory: Inventory, nodes: list[str] | None = None
) -> list[CheckResult]:
    """Every hypervisor check for the spec's hosts and VMs (or those hosting `nodes`)."""
    load_all()
    placements = place(spec)
    if nodes:
        placements = [p for p in placements if p.vm in nodes]
    hosts = [h for h in spec.hosts if not nodes or any(p.host == h.name for p in placements)]
    out: list[CheckResult] = []
    for host in hosts:
        # vCenter names a host by the address it was added with (as the planner matches it).
        observed = inventory.host(host.address) or inventory.host(host.name)
        # Presence is reported when it fails; the host's other checks stand for it otherwise.
        present = run_on(REGISTRY["hv.host.present"], host.name, observed)
        if observed is None:
            out.append(present)
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
        out += [run_on(c, host.name, ctx) for c in _scoped("host")]
    for p in placements:
        vm = inventory.vm(p.vm)
        present = run_on(REGISTRY["hv.vm.present"], p.vm, vm)
        if vm is None:
            out.append(present)
            continue
        out += [run_on(c, p.vm, VmCtx(spec, p, vm)) for c in _scoped("vm")]
    return out


def _vm_index(spec: Spec, name: str) -> int:
    return next(i for i, v in enumerate(spec.vms) if v.name == name)


def discovery_record(
    rack: str, run: RunDir | None, runs_root: Path
) -> tuple[Inventory, str] | None:
    """The newest recorded discovery: provision.json observed_after, else plan.json observed.

    Looks in `run` first, then in earlier runs of the rack, newest first (only runs that
    hold a provision or plan record are read, and a run with an unreadable record is
    passed over, as `list_runs` leaves it out).
    """
    candidates: list[RunDir] = [run] if run else []
    for path in reversed(run_paths(runs_root, rack)):
        recorded = any((path / f"{s}.json").is_file() for s in ("provision", "plan"))
        if recorded and summarize(path).problem is None:
            candidates.append(RunDir(path))
    for cand in candidates:
        for stage, key in (("provision", "observed_after"), ("plan", "observed")):
            record = cand.read_stage(stage)
            data: Any = (record or {}).get("data") or {}
            if isinstance(data, dict) and data.get(key):
                return Inventory.model_validate(data[key]), str(cand.path / f"{stage}.json")
    return None
