"""Assemble run.json from a run directory's stage files, each read through its model.

Every stage file is read with `model_validate` of its record (rackcert.core.stage_records), the
same model its producer wrote through; a missing stage, or one that does not fit its model
(another version of rackcert, a hand edit), is recorded as such instead of failing the
report: a report of a partial run says what is missing.
The verdict only combines what the stages recorded about themselves (stage
status, each check's status, bench's own verdict); it never re-judges figures.

Example:
    record = assemble(RunDir.open("runs/lab/20260101T000000.000000Z"))
    record.verdict.verdict  # 'PASS' | 'FAIL' | 'INCOMPLETE'
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel

from rackcert.core import pci
from rackcert.core.errors import RecordError
from rackcert.core.observed import Inventory, ObservedHost
from rackcert.core.results import CheckResult, Severity, Status
from rackcert.core.runs import STAGES, RunDir, read_capped, read_capped_bytes, read_json, utc_now
from rackcert.core.spec_loader import MAX_SPEC_BYTES
from rackcert.core.stage_records import (
    BenchData,
    ConfigureData,
    PlanData,
    ProvisionData,
    ValidateData,
)
from rackcert.core.stage_records import Model as DataModel
from rackcert.core.stage_records import StageRecord as StageRecordModel
from rackcert.core.untrusted import cap, cap_strings
from rackcert.report import matrix as matrix_mod
from rackcert.report.burnin import burnin_section
from rackcert.report.record import (
    Bench,
    CheckCounts,
    ConfigureHost,
    GpuRecord,
    Hardware,
    HealthEvent,
    HostRecord,
    MeshCoverage,
    NicRecord,
    NvlinkPair,
    ReferenceFigure,
    RunInfo,
    RunRecord,
    RunVerdict,
    StageRecord,
    VmRecord,
)
from rackcert.report.rehearsal import rehearsal_line
from rackcert.report.rolling import upgrade_section
from rackcert.report.software import (
    nodes_of,
    versions_from_checks,
    versions_from_facts,
    versions_from_packages,
)

M = TypeVar("M", bound=DataModel)
PciRecord = TypeVar("PciRecord", GpuRecord, NicRecord)

EVIDENCE_STAGES = tuple(s for s in STAGES if s != "report")
REQUIRED_STAGES = ("validate", "bench")  # a certificate needs both; the rest may be older runs
OK_STATUSES = {"ok"}
MAX_DESCRIPTION = 400  # characters of metadata.description shown in the report's header
FAILED_STATUSES = {"failed"}


def _version() -> str:
    try:
        return metadata.version("rackcert")
    except metadata.PackageNotFoundError:
        return "unknown"


def _read_stages(run: RunDir) -> tuple[dict[str, StageRecordModel], dict[str, str]]:
    records: dict[str, StageRecordModel] = {}
    unreadable: dict[str, str] = {}
    for stage in EVIDENCE_STAGES:
        try:
            rec = run.read_record(stage)
        except RecordError as exc:
            unreadable[stage] = str(exc)
            continue
        if rec is not None:
            records[stage] = rec
    return records, unreadable


def _data(records: dict[str, StageRecordModel], stage: str, model: type[M]) -> M:
    """The typed data of `stage`, or an empty one when the stage is not recorded."""
    rec = records.get(stage)
    return rec.data if rec is not None and isinstance(rec.data, model) else model()


def _run_info(run: RunDir) -> RunInfo:
    meta = run.meta
    spec_path = run.path / "spec.yaml"
    try:  # capped: a planted 1 GB spec.yaml cost the report 2 GB of memory
        file_sha: str | None = hashlib.sha256(
            read_capped_bytes(spec_path, MAX_SPEC_BYTES)
        ).hexdigest()
    except RecordError as exc:
        file_sha = None if not spec_path.exists() else f"unreadable ({exc})"
    recorded = str(meta.get("spec_sha256", ""))
    return RunInfo(
        rack=str(meta.get("rack", run.path.parent.name)),
        run_id=run.path.name,
        created_at=str(meta.get("created_at", "")),
        spec_sha256=recorded,
        spec_file_sha256=file_sha,
        spec_intact=(file_sha == recorded) if file_sha and recorded else None,
        schema_version=meta.get("schema_version"),
        description=spec_description(run),
    )


def _stage_records(
    records: dict[str, StageRecordModel], unreadable: dict[str, str], spec_sha: str
) -> list[StageRecord]:
    out = []
    for stage in EVIDENCE_STAGES:
        rec = records.get(stage)
        if stage in unreadable:
            out.append(
                StageRecord(stage=stage, present=True, status="unreadable", error=unreadable[stage])
            )
        elif rec is None:
            out.append(StageRecord(stage=stage, present=False))
        else:
            out.append(
                StageRecord(
                    stage=stage,
                    present=True,
                    status=rec.status,
                    error=rec.error,
                    started_at=rec.started_at,
                    finished_at=rec.finished_at,
                    spec_sha256_matches=rec.spec_sha256 == spec_sha if spec_sha else None,
                )
            )
    return out


def _inventory(records: dict[str, StageRecordModel]) -> tuple[Inventory | None, str]:
    """The newest discovery recorded: after provisioning, else before, else the plan's."""
    prov = _data(records, "provision", ProvisionData)
    plan = _data(records, "plan", PlanData)
    for inv, where in (
        (prov.observed_after, "provision.json observed_after"),
        (prov.observed_before, "provision.json observed_before"),
        (plan.observed, "plan.json observed"),
    ):
        if inv is not None:
            return inv, where
    return None, ""


def _referenced_inventory(
    run: RunDir, records: dict[str, StageRecordModel]
) -> tuple[Inventory | None, str]:
    """The discovery validate used from an earlier run of the rack (data.hypervisor_source).

    An after-upgrade `rackcert validate` records no discovery of its own; it names the
    provision.json / plan.json it read. That file is evidence too, but outside this run
    directory (and its manifest): the source says so.
    """
    src = _data(records, "validate", ValidateData).hypervisor_source
    if not src:
        return None, ""
    path = Path(src)
    candidates = [
        path,
        run.path.parents[1] / path.parent.parent.name / path.parent.name / path.name,
    ]
    for cand in candidates:
        if cand.is_file() and (cand.parent / "meta.json").is_file() and cand.parent != run.path:
            stage = cand.stem
            if stage not in ("plan", "provision"):
                continue
            try:
                rec = RunDir(cand.parent).read_record(stage)
            except RecordError:
                continue
            if rec is None or rec.rack != run.meta.get("rack"):
                continue
            data = rec.data
            inv = (
                data.observed_after or data.observed_before
                if isinstance(data, ProvisionData)
                else getattr(data, "observed", None)
            )
            if inv is None:
                continue
            where = f"{cand.parent.name}/{cand.name}"
            return inv, f"run {where}, referenced by validate.json (outside this run's manifest)"
    return None, ""


def _extra(model: BaseModel, *keys: str) -> Any:
    extra = model.model_extra or {}
    return next((extra[k] for k in keys if extra.get(k) not in (None, "")), None)


def _pci_records(
    host: ObservedHost, record: type[PciRecord], wanted: Callable[[int, int], bool]
) -> list[PciRecord]:
    """One record per passthrough-capable device of a kind: GPUs and NICs read the same fields."""
    return [
        record(
            pci=d.id,
            model=d.device_name or f"{d.vendor_id:04x}:{d.device_id:04x}",
            numa_node=d.numa_node,
            passthru_enabled=d.passthru_enabled,
            passthru_active=d.passthru_active,
        )
        for d in host.pci_devices
        if wanted(d.vendor_id, d.class_id)
    ]


def _esxcli_record(h: ObservedHost) -> dict[str, Any]:
    """The host's esxcli answers for the report: build and driver VIBs, or unknown and why.

    Driver VIBs are every VIB but VMware's base image (vendor VMware): inbox drivers (VMW)
    and partners' (NVD, MEL, DEL, ...), the ones an upgrade or a vendor bundle changes.
    """
    facts = h.esxcli
    if facts is None:
        return {"esxcli": "unknown: not asked"}
    if not facts.answered:
        return {"esxcli": cap(f"unknown: {facts.error or 'no answer'}")}
    return {
        "esxcli": "answered",
        "esxcli_build": cap(facts.build),
        "driver_vibs": [
            cap(f"{v.name} {v.version} ({v.vendor})") for v in facts.vibs if v.vendor != "VMware"
        ],
    }


def _hardware(inv: Inventory | None, source: str) -> tuple[Hardware, dict[str, dict[str, str]]]:
    if inv is None:
        return Hardware(), {}
    hosts, settings = [], {}
    for h in inv.hosts:
        gpus = _pci_records(h, GpuRecord, pci.is_nvidia_gpu)
        nics = _pci_records(h, NicRecord, pci.is_mellanox_nic)
        bios = _extra(h, "bios_version", "bios")
        hosts.append(
            HostRecord(
                name=h.name,
                vendor=h.vendor,
                model=h.model,
                esxi_version=h.esxi_version,
                esxi_build=h.esxi_build,
                bios_version=str(bios) if bios else "",
                **_esxcli_record(h),
                ats_enabled=h.ats_enabled,
                connection_state=h.connection_state,
                in_maintenance=h.in_maintenance,
                gpus=gpus,
                nics=nics,
                vms=list(h.vm_names),
            )
        )
        settings[h.name] = {
            "ats_enabled": _text(h.ats_enabled),
            "connection_state": h.connection_state,
            "in_maintenance": _text(h.in_maintenance),
            **{f"passthru {g.pci}": _passthru(g) for g in gpus + nics},
        }
    vms = []
    for v in inv.vms:
        devices = [d.id or d.vgpu or d.backing for d in v.passthrough]
        vms.append(
            VmRecord(
                name=v.name,
                host=v.host,
                power_state=v.power_state,
                firmware=v.firmware,
                num_cpus=v.num_cpus or None,
                memory_mb=v.memory_mb or None,
                memory_reservation_locked=v.memory_reservation_locked,
                hardware_version=v.hardware_version,
                passthrough=[str(d) for d in devices if d],
            )
        )
        settings[v.name] = {
            "firmware": v.firmware,
            "hardware_version": v.hardware_version,
            "memory_reservation_locked": _text(v.memory_reservation_locked),
            "num_cpus": str(v.num_cpus),
            "memory_mb": str(v.memory_mb),
            "passthrough": ", ".join(str(d) for d in devices if d),
            **{k: str(val) for k, val in sorted(v.extra_config.items())},
        }
    hw = Hardware(
        source=source, vcenter=inv.vcenter, api_version=inv.api_version, hosts=hosts, vms=vms
    )
    return hw, settings


def _text(value: Any) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _passthru(dev: GpuRecord | NicRecord) -> str:
    if dev.passthru_active:
        return "active"
    if dev.passthru_enabled:
        return "enabled (not active)"
    return "off"


def _facts(run: RunDir) -> dict[str, Any]:
    path = run.path / "facts.json"
    if not path.is_file():
        return {}
    try:
        # A node's value is cut where run.json records it; facts.json keeps the whole.
        return cap_strings(nodes_of(read_json(path)), where="facts.json")
    except RecordError:
        return {}


def _software(
    facts: dict[str, Any], records: dict[str, StageRecordModel], checks: list[CheckResult]
) -> dict[str, dict[str, str]]:
    """Versions per node: facts.json, then what checks observed, validate's nodes, bench's env."""
    out: dict[str, dict[str, str]] = {}
    for node, node_facts in facts.items():
        out.setdefault(str(node), {}).update(versions_from_facts(node_facts))
    for node, seen in versions_from_checks(checks).items():
        for key, value in seen.items():
            out.setdefault(node, {}).setdefault(key, value)
    for node, node_facts in facts.items():
        for key, value in versions_from_packages(node_facts).items():
            out.setdefault(str(node), {}).setdefault(key, value)
    for node, info in _data(records, "validate", ValidateData).nodes.items():
        for key, value in info.versions.items():
            out.setdefault(node, {}).setdefault(key, value)
    env = _data(records, "bench", BenchData).environment
    if env:
        per_node = nodes_of(env.get("nodes")) if isinstance(env.get("nodes"), dict) else {}
        for node, info in per_node.items():
            for key, value in versions_from_facts(info).items():
                out.setdefault(str(node), {}).setdefault(key, value)
        if not per_node:
            # torch's own CUDA build is not the node's CUDA: keep it apart from the matrix's cuda.
            shared = versions_from_facts({k: v for k, v in env.items() if k != "cuda"})
            if env.get("cuda"):
                shared["torch_cuda"] = str(env["cuda"])
            if shared:
                out["bench environment"] = shared
    return {node: _plausible(v) for node, v in sorted(out.items()) if _plausible(v)}


_VERSIONED = {
    "nvidia_driver",
    "cuda",
    "cuda_driver",
    "ofed",
    "container_toolkit",
    "nic_firmware",
    "kernel",
    "bios_version",
    "nccl",
    "torch",
    "horovod",
    "torch_cuda",
}


def _plausible(versions: dict[str, str]) -> dict[str, str]:
    """Drop 'versions' with no digit in them ('nvidia-smi not found'): nothing was seen."""
    return {
        k: v
        for k, v in sorted(versions.items())
        if k not in _VERSIONED or any(ch.isdigit() for ch in v)
    }


def _nvlink(checks: list[CheckResult]) -> list[NvlinkPair]:
    """Per node, what the passing NVLink check saw (nvidia-smi nvlink / topo -m in the guest)."""
    pairs: list[NvlinkPair] = []
    seen: set[str] = set()
    for c in checks:
        if "nvlink" in c.id and c.status == Status.passed and c.node not in seen:
            pairs.append(NvlinkPair(node=c.node, gpus=[], link=c.observed, source=f"check {c.id}"))
            seen.add(c.node)
    return pairs


def _mesh(records: dict[str, StageRecordModel]) -> MeshCoverage | None:
    """ssh.peers' coverage of the mesh as validate recorded it (none when it did not run)."""
    peers = _data(records, "validate", ValidateData).peers
    if peers is None:
        return None
    return MeshCoverage.model_validate(peers.model_dump(include=set(MeshCoverage.model_fields)))


def _checks(records: dict[str, StageRecordModel]) -> list[CheckResult]:
    return list(_data(records, "validate", ValidateData).results)


def _counts(checks: list[CheckResult]) -> CheckCounts:
    by = {s: sum(1 for c in checks if c.status == s) for s in Status}
    return CheckCounts(
        total=len(checks),
        passed=by[Status.passed],
        failed=by[Status.failed],
        error=by[Status.error],
        skipped=by[Status.skipped],
    )


def _configure(records: dict[str, StageRecordModel]) -> list[ConfigureHost]:
    """Per-host ok/changed/failed/unreachable and the failed tasks' messages."""
    hosts = _data(records, "configure", ConfigureData).hosts
    return [
        ConfigureHost(
            host=name,
            ok=h.ok,
            changed=h.changed,
            failed=h.failed,
            unreachable=int(h.unreachable),
            messages=[f"{f.task}: {f.message}" for f in h.failures][:20],
        )
        for name, h in hosts.items()
    ]


def _bench(records: dict[str, StageRecordModel]) -> Bench:
    data = _data(records, "bench", BenchData)
    return Bench(
        environment=data.environment,
        allreduce=data.allreduce,
        resnet50=data.resnet50,
        storage=data.storage.model_dump(mode="json") if data.storage else None,
        verdict=data.verdict,
        localise=data.localise,  # typed; read through rackcert.core.localisation only
    )


def combine_verdict(
    stages: list[StageRecord],
    checks: list[CheckResult],
    bench: Bench,
    *,
    spec_intact: bool | None = None,
) -> RunVerdict:
    """PASS, FAIL or INCOMPLETE from the stages' own statuses and verdicts (FAIL wins)."""
    fail: list[str] = []
    incomplete: list[str] = []
    if spec_intact is False:
        incomplete.append("spec.yaml no longer has the digest recorded in meta.json")
    by_stage = {s.stage: s for s in stages}
    for s in stages:
        if not s.present:
            if s.stage in REQUIRED_STAGES:
                incomplete.append(f"stage {s.stage} not recorded")
            continue
        status = (s.status or "").lower()
        if status in FAILED_STATUSES:
            fail.append(f"stage {s.stage} failed" + (f": {s.error}" if s.error else ""))
        elif status not in OK_STATUSES:
            incomplete.append(
                f"stage {s.stage} is {status or 'without status'}"
                + (f": {s.error}" if s.error else "")
            )
        if s.spec_sha256_matches is False:
            incomplete.append(f"stage {s.stage} was recorded for a different spec")
    failing = [
        c
        for c in checks
        if c.status in (Status.failed, Status.error) and c.severity == Severity.error
    ]
    for c in failing[:10]:
        fail.append(f"check {c.id} on {c.node}: {c.reason or c.observed or c.status.value}")
    if len(failing) > 10:
        fail.append(f"... and {len(failing) - 10} more failing checks")
    if by_stage["validate"].present and not checks:
        incomplete.append("validate recorded no check results")
    not_judged: list[str] = []
    if by_stage["bench"].present:
        v = bench.verdict
        if v is None:
            incomplete.append("bench recorded no verdict")
        else:
            not_judged = [f"bench {line}" for line in v.not_judged]
            if v.verdict == "FAIL":
                fail.extend(f"bench: {r}" for r in v.reasons or ["verdict FAIL"])
            elif v.verdict == "INCOMPLETE":
                required = [c for c in v.checks if c.required and c.status is Status.skipped]
                incomplete.extend(
                    f"bench: {c.id} (required) not judged: {c.reason or 'not measured'}"
                    for c in required
                )
                if not required:
                    incomplete.append("bench: nothing was judged")
    if fail:
        return RunVerdict(verdict="FAIL", reasons=fail + incomplete, not_judged=not_judged)
    if incomplete:
        return RunVerdict(verdict="INCOMPLETE", reasons=incomplete, not_judged=not_judged)
    reasons = ["validate: all checks of severity error passed"]
    if bench.verdict is not None:
        judged = [c for c in bench.verdict.checks if c.status is Status.passed]
        reasons += [f"bench: {c.id} passed: {c.observed} ({c.expected})" for c in judged]
    return RunVerdict(verdict="PASS", reasons=reasons, not_judged=not_judged)


def _same_gpu_as_reference(bench: Bench, ref: matrix_mod.Reference | None) -> bool:
    """The benchmark ran on the reference's GPU model (as bench's environment recorded it)."""
    gpu = bench.environment.get("gpu")
    if ref is None or not isinstance(gpu, str) or not gpu:
        return False
    rule = next((r for r in ref.components if r.component == "gpu_model"), None)
    return rule is None or rule.holds(gpu)


def _stored_spec(run: RunDir) -> dict[str, Any]:
    """The spec stored in the run as plain data, read without re-validating it: the report
    must still render a run whose spec a later rackcert would refuse."""
    path = run.path / "spec.yaml"
    try:
        spec = yaml.safe_load(read_capped(path, MAX_SPEC_BYTES)) if path.is_file() else None
    except (OSError, yaml.YAMLError, RecursionError, RecordError):
        return {}
    return spec if isinstance(spec, dict) else {}


def _text_at(spec: dict[str, Any], section: str, key: str) -> str | None:
    part = spec.get(section)
    value = part.get(key) if isinstance(part, dict) else None
    return value if isinstance(value, str) and value else None


def spec_reference(run: RunDir) -> str | None:
    """certification.reference of the spec stored in the run."""
    return _text_at(_stored_spec(run), "certification", "reference")


def spec_description(run: RunDir) -> str:
    """metadata.description of the spec stored in the run, stripped of control characters
    and capped: it is what the run says it certified (the demo says there what it left out,
    e.g. the Horovod path while the lab's image lacks it), so the report's header shows it."""
    text = _text_at(_stored_spec(run), "metadata", "description") or ""
    return "".join(c for c in text if c.isprintable())[:MAX_DESCRIPTION]


def assemble(
    run: RunDir, *, reference: str | None = None, matrix_dir: Path | None = None
) -> RunRecord:
    """The run.json record of `run` (nothing is written)."""
    info = _run_info(run)
    records, unreadable = _read_stages(run)
    stages = _stage_records(records, unreadable, info.spec_sha256)
    inv, source = _inventory(records)
    if inv is None:
        inv, source = _referenced_inventory(run, records)
    hardware, settings = _hardware(inv, source)
    facts = _facts(run)
    checks = _checks(records)
    software = _software(facts, records, checks)
    hardware.nvlink_pairs = _nvlink(checks)
    wanted = reference or spec_reference(run)
    ref = matrix_mod.find_reference(wanted, matrix_dir) if wanted else None
    bench = _bench(records)
    bench.reference_resnet50 = [
        ReferenceFigure(nodes=n, images_per_sec=v)
        for n, v in matrix_mod.reference_figures(ref).items()
    ]
    comparison = matrix_mod.compare(ref, hardware, software, wanted=wanted)
    if not _same_gpu_as_reference(bench, ref):
        # Published figures of other GPUs (or of GPUs vs a CPU run) are no context: leave out.
        bench.reference_resnet50 = []
    upgrade = upgrade_section(run)
    return RunRecord(
        generated_at=utc_now(),
        generator=f"rackcert {_version()}",
        run=info,
        stages=stages,
        missing_stages=[s.stage for s in stages if not s.present],
        verdict=combine_verdict(stages, checks, bench, spec_intact=info.spec_intact),
        hardware=hardware,
        software=software,
        settings=settings,
        matrix=comparison,
        configure=_configure(records),
        checks=checks,
        check_counts=_counts(checks),
        ssh_mesh=_mesh(records),
        bench=bench,
        rehearsal=rehearsal_line(run),
        upgrade=upgrade[0],
        upgrade_status=upgrade[1],
        health_checks=_health_events(run),
        burnin=burnin_section(run),
    )


HEALTH_DIR = "health"  # artifacts/health/*.jsonl: the nodes' health-check records


def _health_events(run: RunDir) -> list[HealthEvent]:
    """The drains and resumes in the health-check records copied into the run (report build
    --health-record), in time order; a line that is no such event is left out."""
    events: list[HealthEvent] = []
    for path in sorted((run.path / "artifacts" / HEALTH_DIR).glob("*.jsonl")):
        for line in path.read_text(errors="replace").splitlines():
            try:
                events.append(HealthEvent.model_validate_json(line))
            except ValueError:
                continue
    return sorted(events, key=lambda e: (e.time, e.node))
