"""run.json: the schema-versioned audit record of one run, as pydantic models.

The record is assembled from the stage files (`rackcert.report.assemble`) and is
the only input of the HTML/PDF report and of `report diff`, so what an auditor
reads and what a diff compares are the same facts. Its JSON Schema is checked
in as `schemas/run.schema.json` (`rackcert report schema` prints it).
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from rackcert.core.burnin_record import BurninFinding, GpuSummary, Reported
from rackcert.core.results import AllreduceResult, CheckResult, ScalingResult, Verdict, VerdictWord
from rackcert.core.stage_records import LocaliseRecord

RECORD_SCHEMA: Final = "rackcert/run"
RECORD_VERSION: Final = 1
MatrixStatus = Literal["matches", "differs", "unknown"]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StageRecord(Model):
    """One stage file as recorded: whether it is there and what it said about itself."""

    stage: str
    present: bool
    status: str | None = Field(None, description="ok, failed or partial, as the stage wrote it")
    error: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    spec_sha256_matches: bool | None = Field(
        None, description="The stage file names the same spec digest as meta.json"
    )


class RunInfo(Model):
    rack: str
    run_id: str = Field(description="The run directory's name (UTC timestamp)")
    created_at: str = ""
    spec_sha256: str = ""
    spec_file_sha256: str | None = Field(None, description="sha256 of spec.yaml as stored")
    spec_intact: bool | None = Field(None, description="spec.yaml still has the recorded digest")
    schema_version: int | None = None
    description: str = Field(
        "", description="metadata.description of the run's spec: what the run says it certified"
    )


class GpuRecord(Model):
    pci: str
    model: str = ""
    numa_node: int | None = None
    passthru_enabled: bool | None = None
    passthru_active: bool | None = None


class NicRecord(Model):
    pci: str
    model: str = ""
    numa_node: int | None = None
    passthru_enabled: bool | None = None
    passthru_active: bool | None = None


class HostRecord(Model):
    name: str
    vendor: str = ""
    model: str = ""
    esxi_version: str = ""
    esxi_build: str = ""
    bios_version: str = ""
    esxcli: str = Field(
        "", description="answered, or unknown and why (the host did not answer esxcli)"
    )
    esxcli_build: str = Field("", description="`esxcli system version get` Build, as the host says")
    driver_vibs: list[str] = Field(
        default_factory=list,
        description="`esxcli software vib list` but VMware's base image: 'name version (vendor)'",
    )
    ats_enabled: bool | None = None
    connection_state: str = ""
    in_maintenance: bool | None = None
    gpus: list[GpuRecord] = Field(default_factory=list)
    nics: list[NicRecord] = Field(default_factory=list)
    vms: list[str] = Field(default_factory=list)


class VmRecord(Model):
    name: str
    host: str | None = None
    power_state: str = ""
    firmware: str = ""
    num_cpus: int | None = None
    memory_mb: int | None = None
    memory_reservation_locked: bool | None = None
    hardware_version: str = ""
    passthrough: list[str] = Field(default_factory=list, description="PCI ids or vGPU profiles")


class NvlinkPair(Model):
    node: str
    gpus: list[str]
    link: str = Field("", description="e.g. NV12 from nvidia-smi topo -m")
    source: str = ""


class Hardware(Model):
    source: str = Field("", description="Which stage's discovery this came from")
    vcenter: str = ""
    api_version: str = ""
    hosts: list[HostRecord] = Field(default_factory=list)
    vms: list[VmRecord] = Field(default_factory=list)
    nvlink_pairs: list[NvlinkPair] = Field(default_factory=list)


class MatrixRow(Model):
    component: str
    label: str
    expected: str
    status: MatrixStatus
    observed: dict[str, str] = Field(
        default_factory=dict, description="Observed value per host or node"
    )
    detail: str = ""


class MatrixComparison(Model):
    reference: str | None = Field(None, description="Certified-matrix entry id")
    title: str = ""
    source: str = ""
    disclaimer: str = ""
    note: str = Field("", description="Why there is no comparison, when there is none")
    rows: list[MatrixRow] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)


class ConfigureHost(Model):
    host: str
    ok: int | None = None
    changed: int | None = None
    failed: int | None = None
    unreachable: int | None = None
    messages: list[str] = Field(default_factory=list)


class CheckCounts(Model):
    total: int = 0
    passed: int = 0
    failed: int = 0
    error: int = 0
    skipped: int = 0


class ReferenceFigure(Model):
    nodes: int
    images_per_sec: float


class Bench(Model):
    environment: dict[str, Any] = Field(default_factory=dict)
    allreduce: AllreduceResult | None = None
    resnet50: ScalingResult | None = None
    storage: dict[str, Any] | None = None
    verdict: Verdict | None = None
    reference_resnet50: list[ReferenceFigure] = Field(
        default_factory=list, description="Published figures of the chosen reference, for context"
    )
    localise: LocaliseRecord | None = Field(
        None,
        description="bench's localisation part (bench.json data.localise) as recorded: per-node"
        " and per-link figures, the outlier rules, findings; read by rackcert.core.localisation",
    )


class RunVerdict(Model):
    verdict: VerdictWord
    reasons: list[str] = Field(default_factory=list)
    not_judged: list[str] = Field(
        default_factory=list, description="What was not judged, and why (never counted as a pass)"
    )


class HealthEvent(Model):
    """A drain or resume the Slurm health check made (rackcert validate --health-check),
    from a node's record given to `rackcert report build --health-record`."""

    time: str = ""
    node: str
    action: Literal["drain", "resume"]
    reason: str = ""
    failing: list[str] = Field(default_factory=list)
    seconds: float | None = None


class UpgradeEvidence(Model):
    """One line of a node's before and after, side by side: a figure, or a check."""

    name: str
    before: str = Field("", description="Measured on the node once drained, before its host")
    after: str = Field("", description="Measured after the roll; empty: not measured")


class UpgradeRow(Model):
    """One node of a rolling upgrade (rackcert upgrade), from the run's upgrade.json."""

    node: str
    host: str = ""
    state: str
    before: dict[str, str] = Field(default_factory=dict, description="Guest versions before")
    after: dict[str, str] = Field(default_factory=dict, description="Guest versions observed after")
    reason: str = Field("", description="Who drained it and why (a failed node's finding)")
    out_minutes: float | None = Field(None, description="Drain to resume, minutes")
    forced_power_off: bool = False
    evidence: list[UpgradeEvidence] = Field(
        default_factory=list,
        description="The resume rule's evidence: every figure and every check that passed"
        " before or after, before and after side by side",
    )
    findings: list[str] = Field(default_factory=list, description="Why it was not resumed")
    timeline: list[str] = Field(
        default_factory=list, description="step: start .. end, in the order they ran"
    )


class MeshCoverage(Model):
    """How much of the n x (n-1) SSH mesh ssh.peers has covered (validation.peer_choice)."""

    mode: str = Field(description="ring+random or all")
    k: int = 0
    checked: int = Field(0, description="Ordered pairs checked in this run")
    mesh_pairs: int = Field(0, description="Ordered pairs of the full mesh")
    covered: int = Field(0, description="Pairs checked at least once, this run included")
    oldest: int | None = Field(None, description="Runs since the stalest pair was checked")
    round: int = 0


class BurninSeries(Model):
    """One node's sampler series, thinned for the report (at most PLOT_POINTS a line):
    seconds from the start; per GPU index, SM clock (MHz), power (W), temperature (C)."""

    t: list[float] = Field(default_factory=list)
    gpus: dict[str, dict[str, list[float | None]]] = Field(default_factory=dict)


class BurninSection(Model):
    """`rackcert burnin`'s evidence in the report: what it named, what it saw per GPU, and
    each node's series for the plots (burnin.json holds the whole series)."""

    verdict: str
    duration_s: float
    findings: list[BurninFinding] = Field(default_factory=list)
    reported: list[Reported] = Field(default_factory=list)
    gpus: list[GpuSummary] = Field(default_factory=list)
    unmeasured: list[str] = Field(default_factory=list)
    series: dict[str, BurninSeries] = Field(default_factory=dict)


class RunRecord(Model):
    """Everything the report shows, from recorded evidence only."""

    record_schema: Literal["rackcert/run"] = Field(RECORD_SCHEMA, alias="schema")
    record_version: Literal[1] = Field(RECORD_VERSION, alias="version")
    generated_at: str
    generator: str = Field(description="rackcert version that assembled the record")
    run: RunInfo
    stages: list[StageRecord]
    missing_stages: list[str] = Field(default_factory=list)
    verdict: RunVerdict
    hardware: Hardware = Field(default_factory=Hardware)
    software: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="Versions per node: driver, CUDA, OFED, kernel, ..."
    )
    settings: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="Hypervisor settings per host and VM"
    )
    matrix: MatrixComparison = Field(default_factory=MatrixComparison)
    configure: list[ConfigureHost] = Field(default_factory=list)
    checks: list[CheckResult] = Field(default_factory=list)
    check_counts: CheckCounts = Field(default_factory=CheckCounts)
    ssh_mesh: MeshCoverage | None = Field(None, description="ssh.peers' mesh coverage")
    bench: Bench = Field(default_factory=Bench)
    rehearsal: str | None = Field(
        None, description="rehearsed on a capture taken at T: N actions, R refusals (rehearse)"
    )
    upgrade: list[UpgradeRow] = Field(
        default_factory=list, description="The rolling upgrade's nodes (rackcert upgrade)"
    )
    upgrade_status: str | None = Field(
        None, description="done or stopped, and why; the certified run it started from"
    )
    health_checks: list[HealthEvent] = Field(
        default_factory=list,
        description="Slurm health-check drains and resumes, from the nodes' records",
    )
    burnin: BurninSection | None = Field(None, description="rackcert burnin's findings and plots")

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of run.json, as checked in under schemas/run.schema.json."""
    schema = RunRecord.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "rackcert:schemas/run.schema.json"
    return schema
