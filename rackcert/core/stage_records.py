"""One typed record per stage: what `<stage>.json` holds, as pydantic models.

Every producer writes through these (`RunDir.write_stage` validates the data against the
stage's model before it writes, and refuses a shape the model does not name), and every
reader (the report, `runs list`, the pipeline's resume) reads through `model_validate`,
so a key nobody writes cannot be read and a key nobody reads cannot be written unnoticed.
`rackcert report schema --stage STAGE` prints each record's JSON Schema.

Extending a stage's record means adding the field here, in one place: the producer, the
report and the published schema then agree. A benchmark's own block of bench.json is the
exception: its model sits beside its unit (validation.bench.units), which gives it to
BenchData (`bench_parts_from`); this module keeps the blocks the spine itself reads.

    >>> rec = BenchRecord.model_validate_json(Path("runs/lab/.../bench.json").read_text())
    >>> rec.data.verdict.verdict
    'INCOMPLETE'
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic_core import core_schema

from rackcert.core import upgrade_layers
from rackcert.core.burnin_record import BurninData
from rackcert.core.observed import Inventory
from rackcert.core.results import AllreduceResult, CheckResult, ScalingResult, Verdict, VerdictWord
from rackcert.core.spec import Certification

SCHEMA_VERSION: Final = 1
StageStatus = Literal["ok", "failed", "partial"]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- plan and provision -------------------------------------------------------------------------
class ActionRecord(Model):
    """provision.planner.Action as recorded: one change, its target and its reason."""

    kind: str
    target: str
    change: str
    reason: str
    host: str = ""
    params: dict[str, Any] = Field(default_factory=dict)
    needs_power_cycle: bool = False
    blocked: str | None = None


class DoneAction(ActionRecord):
    result: str = Field(description="What apply said when it finished the action")
    started_at: str = Field("", description="UTC time apply started the action")
    ended_at: str = Field("", description="UTC time the action finished")


class SkippedAction(ActionRecord):
    skipped: str = Field(description="Why apply left the action undone")
    ended_at: str = Field("", description="UTC time apply gave the action up")


class LeftAlone(Model):
    """A VM a vCenter extension manages (vCLS agents): never workload, never touched."""

    name: str
    host: str = ""
    managed_by: str
    reason: str


class PlanData(Model):
    observed: Inventory | None = Field(None, description="vCenter as discovery saw it")
    actions: list[ActionRecord] = Field(default_factory=list)
    left_alone: list[LeftAlone] = Field(
        default_factory=list, description="VMs managed by vCenter extensions, left alone"
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="What the plan allows but advises against, per VM (GPUDirect RDMA across"
        " NUMA nodes)",
    )
    waves: list[list[str]] = Field(
        default_factory=list,
        description="Hosts provision prepares together: first every host without running VMs,"
        " then hosts with running VMs (--power-cycle) in waves of what the cluster can lose",
    )


class ProvisionData(Model):
    observed_before: Inventory | None = None
    actions: list[ActionRecord] = Field(default_factory=list)
    done: list[DoneAction] = Field(default_factory=list)
    skipped: list[SkippedAction] = Field(default_factory=list)
    observed_after: Inventory | None = Field(None, description="Discovery after apply")
    vms: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Each spec VM after provision: exists, power_state, guest_ip, address,"
        " what the wait for Tools or SSH saw, and left_off (why it stays powered off)",
    )
    hosts: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Each host provision worked on: wave, state (prepared, failed, skipped),"
        " error, started_at, ended_at",
    )
    session_renewals: int = Field(
        0, description="Times the vCenter session expired mid-run and was logged in again"
    )


# -- configure ----------------------------------------------------------------------------------
class TaskProblem(Model):
    task: str
    role: str
    message: str


class ConfigureHost(Model):
    """rackcert.configure.events.HostResult.to_dict()."""

    name: str
    ok: int = 0
    changed: int = 0
    failed: int = 0
    skipped: int = 0
    rescued: int = 0
    ignored: int = 0
    unreachable: bool = False
    tasks_done: int = 0
    changed_tasks: list[str] = Field(default_factory=list)
    failures: list[TaskProblem] = Field(default_factory=list)
    outcomes: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="What a role says became of its component here, by role (nccl_tests:"
        " installed, found on PATH, or skipped and why)",
    )
    status: Literal["ok", "changed", "failed", "unreachable"] = "ok"


class ConfigureTotals(Model):
    hosts: int = 0
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0


class EnrolledKey(Model):
    host: str = Field(description="known_hosts name: address, or [address]:port")
    key_type: str
    fingerprint: str = Field(description="SHA256:... as ssh-keygen -l prints it")


class HostKeys(Model):
    """The rack's known_hosts this stage trusted (rackcert.core.known_hosts), what it enrolled."""

    known_hosts: str
    pinned: bool = Field(False, description="The spec's guest.ssh.known_hosts: nothing enrolled")
    enrolled: list[EnrolledKey] = Field(
        default_factory=list, description="Keys trusted on first contact in this stage"
    )


class ConfigureData(Model):
    check: bool = False
    tags: list[str] = Field(default_factory=list)
    skip_tags: list[str] = Field(default_factory=list)
    limit: str | None = None
    playbook: str = ""
    rc: int | None = None
    totals: ConfigureTotals = Field(default_factory=ConfigureTotals)
    hosts: dict[str, ConfigureHost] = Field(default_factory=dict)
    artifacts: str = Field("", description="Ansible artifacts, relative to the run directory")
    inventory: str = Field("", description="Generated inventory, relative to the run directory")
    ansible_ident: str = ""
    strategy: str = Field(
        "",
        description="The Ansible strategy plugin site.yml ran with (guest.ansible_strategy)",
    )
    extra_vars: list[str] = Field(
        default_factory=list,
        description="The operator's --extra-vars: @files as given, k=v as names only",
    )
    warnings: list[str] = Field(default_factory=list)
    host_keys: HostKeys | None = None


# -- validate -----------------------------------------------------------------------------------
class ValidateNode(Model):
    address: str = ""
    target: str = Field("", description="testinfra host spec, e.g. ssh://root@10.0.0.1:22")
    reachable: bool | None = Field(None, description="None when no guest check ran")
    error: str = ""
    gather_seconds: float | None = None
    counts: dict[str, int] = Field(default_factory=dict)
    versions: dict[str, str] = Field(
        default_factory=dict, description="What the checks observed: nvidia_driver, cuda, ..."
    )
    status: Literal["passed", "failed"] = "passed"


class ValidateSummary(Model):
    """Counts that add up to total; a failing warning-severity check is a warning."""

    total: int = 0
    passed: int = 0
    failed: int = Field(0, description="Checks of severity error that failed")
    errors: int = Field(0, description="Checks of severity error that could not run")
    warnings: int = Field(0, description="Checks of severity warning/info that failed or errored")
    skipped: int = 0
    error_failures: int = 0
    failing: list[str] = Field(default_factory=list, description="node:check of each failure")
    ok: bool = False
    wall_seconds: float = 0.0


class PeerPair(Model):
    node: str
    peer: str
    since: int | None = Field(
        None, description="Runs since this node last checked this peer; None: never before"
    )


class PeerMesh(Model):
    """ssh.peers' choice of pairs (validation.peer_choice) and how much of the mesh is covered."""

    mode: str = Field(description="ring+random (ring neighbours + k peers) or all")
    k: int = Field(0, description="Peers beyond the two ring neighbours (0 with all)")
    seed: str = Field(description="Digest of the run id the choice was seeded from")
    round: int = Field(description="How many runs with ssh.peers this rack's history holds")
    pairs: list[PeerPair] = Field(default_factory=list, description="Pairs checked this run")
    checked: int = 0
    mesh_pairs: int = Field(0, description="Ordered pairs of the full mesh, n x (n-1)")
    covered: int = Field(0, description="Ordered pairs checked at least once, this run included")
    oldest: int | None = Field(
        None, description="Runs since the stalest pair was checked (None while some never was)"
    )
    history: str | None = Field(None, description="peers.json: the history for the next run")


class ValidateData(Model):
    results: list[CheckResult] = Field(default_factory=list)
    nodes: dict[str, ValidateNode] = Field(default_factory=dict)
    summary: ValidateSummary = Field(default_factory=ValidateSummary)
    checks: list[str] = Field(default_factory=list, description="Guest check ids that ran")
    skipped_by_request: list[str] = Field(default_factory=list)
    local: bool = False
    hypervisor_source: str | None = Field(
        None, description="The provision.json/plan.json the hypervisor checks read"
    )
    facts: str | None = Field(None, description="facts.json, when pyinfra's snapshot was taken")
    tool_path: str | None = None
    host_keys: HostKeys | None = None
    compared_with: str | None = Field(
        None, description="The rack's last certified (PASS) run this one was compared with"
    )
    changes: list[str] = Field(
        default_factory=list, description="What changed since that run, one line each"
    )
    regressions: list[str] = Field(
        default_factory=list, description="Changes for the worse: any one fails validate"
    )
    peers: PeerMesh | None = Field(None, description="ssh.peers' pairs and mesh coverage")


# -- bench --------------------------------------------------------------------------------------
class BenchEngine(Model):
    name: str = Field(description="nccl, gloo or horovod")
    worker_backend: str = Field(description="torch or horovod")
    device: str = Field(description="cuda, cpu, or auto (the nodes chose)")
    horovod_available: bool = False


class BenchRank(Model):
    rank: int
    host: str
    local_rank: int
    bus_id: str | None = Field(None, description="PCI bus id of the rank's GPU (nvidia-smi's)")


class SlurmPlacement(Model):
    """Where Slurm ran one srun launch (validation.bench.slurm_launch.placement)."""

    job_ids: list[int] = Field(default_factory=list, description="Slurm job ids of the launch")
    nodes: list[str] = Field(default_factory=list, description="The nodes Slurm chose, rank order")
    ranks: int = Field(0, description="Tasks that reported where they ran")


class BenchLaunch(Model):
    """One launch. Beside these keys, the raw answer of each task whose unit keeps it in
    the launch record (`BenchUnit.keeps_answer`), under the task's name (the spine names
    no task: validation.bench.units does)."""

    model_config = ConfigDict(extra="allow")

    label: str
    tasks: list[str]
    log: str
    commands: list[list[str]]
    wall_s: float | None = None
    ranks: list[BenchRank] | None = None
    compile_cache: dict[str, Any] | None = Field(
        None,
        description="The nodes' inductor/Triton cache directory and how many files it held"
        " when the launch started (0: a cold compile)",
    )
    exit_warning: str | None = Field(
        None,
        description="Every rank reported its figures, then a process did not exit cleanly:"
        " recorded, not a failed launch",
    )
    slurm: SlurmPlacement | None = Field(None, description="srun launches: job and nodes")
    phases: dict[str, float | None] | None = Field(
        None,
        description="Rank 0's clock: started_s its process's age when the worker began (the"
        " launcher's start, the interpreter), then seconds per phase (connect_s: torch"
        " imported and the ranks met; environment_s; one per task)",
    )

    def answer(self, task: str) -> Any:
        """The raw answer the launch kept for `task`, None where it kept none."""
        return (self.__pydantic_extra__ or {}).get(task)


class StorageNode(Model):
    """validation.bench.node.storage.run's answer for one node."""

    path: str
    synthetic: bool = False
    files: int = 0
    bytes_in_files: int = 0
    cache_drop_requested: bool = False
    readers: int = 0
    block_bytes: int = 0
    duration_s: float = 0.0
    reads: int = 0
    errors: int = 0
    bytes_read: int = 0
    throughput_mb_s: float = 0.0
    iops: float = 0.0
    latency_ms: dict[str, float] = Field(default_factory=dict)
    node: str | None = Field(None, description="The bench node (ssh runs)")
    wall_s: float | None = Field(None, description="The launch's wall time (ssh runs)")
    engine: str = Field("pread", description="fio (its version) or pread, the fallback reader")
    fio_error: str | None = Field(None, description="Why fio could not run (pread ran instead)")
    command: list[str] | None = Field(None, description="The fio command line that ran")


class StorageResult(Model):
    skipped: bool = False
    reason: str = Field("", description="Why it was skipped")
    note: str = Field("", description="Which directory was read, and why that one")
    path: str = ""
    throughput_mb_s: float = Field(0.0, description="Sum over the nodes")
    nodes: list[StorageNode] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _older_local_shape(cls, raw: object) -> object:
        """Local records before this model repeated their one node's keys at the top."""
        if isinstance(raw, dict) and raw.get("nodes") and "reads" in raw:
            keep = set(cls.model_fields)
            return {k: v for k, v in raw.items() if k in keep}
        return raw


class Rows(BaseModel):
    """A localisation row: the fields every reader relies on are declared; a probe's own
    figures (a GPU's metrics, iperf3's extra numbers) are kept as they came."""

    model_config = ConfigDict(extra="allow")


class LinkRow(Rows):
    """One pair's link figures (validation.bench.localisation.stages: link rounds)."""

    a: str
    b: str
    round: int | None = None
    engine: str | None = None
    gbps: float | None = None
    latency_us: float | None = None
    wall_s: float | None = None
    error: str | None = None
    allreduce: dict[str, Any] | None = None


class NodeRow(Rows):
    """One node's per-node stage: its units (CPU or each GPU), nvidia-smi rows, allreduce."""

    node: str
    error: str | None = None
    units: list[dict[str, Any]] = Field(default_factory=list)
    smi: list[dict[str, Any]] = Field(default_factory=list)
    allreduce: dict[str, Any] | None = None


class RankFigure(Model):
    rank: int | None = None
    host: str | None = None
    bus_id: str | None = None
    images_per_sec: float | None = None


class RankRun(Model):
    """One scaling launch's per-rank images/s, with the rank's host and GPU."""

    label: str = ""
    ranks: list[RankFigure] = Field(default_factory=list)


class LocaliseFinding(Model):
    """A part named: one failed verdict check (validation.bench.localisation.outliers)."""

    id: str
    kind: Literal["link", "node", "gpu", "compute", "node_allreduce", "rank"]
    target: str
    nodes: list[str] = Field(default_factory=list)
    pci: str | None = None
    metric: str
    value: float
    unit: str
    reference: float | None = None
    ratio: float | None = None
    observed: str
    expected: str
    message: str


class ConfirmBlock(Model):
    """What confirmation measured again and what cleared (validation.bench.localisation.confirm)."""

    first: list[str] | None = None
    tried: list[str] = Field(default_factory=list)
    cleared: list[str] = Field(default_factory=list)
    rounds: list[list[list[str]]] | None = None
    nodes_again: bool | None = None
    node_scale: dict[str, float] | None = None
    new: list[str] | None = None
    wall_s: float | None = None


class LocaliseRecord(Model):
    """bench.json's `localise` block (schema 1): per-node and per-link figures, the rules,
    the findings that name a node, GPU or link (validation.bench.localisation.stages)."""

    schema_: int = Field(1, alias="schema", description="The block's own schema: 1")
    pattern: str | None = None
    k: int | None = None
    engine: str | None = None
    launcher: str | None = None
    pair_allreduce: bool | None = None
    nodes_measured: list[str] = Field(default_factory=list)
    line_rate_gbps: float | None = None
    line_rate_source: str | None = None
    rules: dict[str, dict[str, Any]] = Field(default_factory=dict)
    rounds: list[list[list[str]]] = Field(default_factory=list)
    links: list[LinkRow] = Field(default_factory=list)
    nodes: list[NodeRow] = Field(default_factory=list)
    ranks: list[RankRun] = Field(default_factory=list)
    skipped: dict[str, str] = Field(default_factory=dict)
    timing: dict[str, float | int | None] = Field(default_factory=dict)
    findings: list[LocaliseFinding] = Field(default_factory=list)
    numbers: dict[str, dict[str, Any]] | None = None
    confirm: ConfirmBlock | None = None

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)


class K8sFile(Model):
    kind: str
    nodes: int
    path: str
    valid: bool


class K8sManifests(Model):
    pod_templates_validated: bool
    image: str
    namespace: str
    kubernetes_schema_version: str
    files: list[K8sFile] = Field(default_factory=list)


class LaunchInfo(Model):
    """How the ranks were started (validation.bench.orchestrate.launch_record)."""

    engine: str = Field(description="horovod or torch.distributed")
    collectives: str = Field(description="nccl, gloo or mpi")
    launcher: str = Field(description="torchrun, horovodrun, mpirun or srun")
    controller: str = Field(description="rendezvous: c10d, gloo, mpi or slurm")
    launched_from: str = Field(description="this machine, or the first node's name")
    jobs: list[SlurmPlacement] | None = Field(
        None, description="srun: each launch's Slurm job ids and the nodes Slurm chose"
    )


class NcclTransportRank(Model):
    """One rank's NCCL_DEBUG=INFO lines, read (validation.bench.burnin.nccl)."""

    rank: str
    version: str | None = None
    transports: dict[str, str] = Field(default_factory=dict)
    net: str | None = None
    gdr: bool = False


class NcclTransport(Model):
    """Which transport the bench's NCCL allreduce really used, per rank, and what is wrong."""

    rdma_expected: bool
    ranks: list[NcclTransportRank] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)


# A benchmark's own block of bench.json, typed by its unit (validation.bench.units): the
# spine names only the blocks it reads itself (resnet50, allreduce, storage, localise: the
# report and the metrics read them); the units say the rest (`bench_parts_from`), so a
# record is read typed wherever the bench is imported, and as the JSON it holds where it
# is not. A provider, not a table: the parts are always those of the units as they stand.
_parts_of: Callable[[], dict[str, Any]] = dict


def bench_parts_from(provider: Callable[[], dict[str, Any]]) -> None:
    """Where the units' blocks come from: `provider()` gives each key's shape (a unit's
    result model, or a list of one). validation.bench.units calls this once."""
    global _parts_of
    _parts_of = provider


@cache
def _adapter(shape: Any) -> TypeAdapter[Any]:
    return TypeAdapter(shape)


def bench_parts() -> dict[str, TypeAdapter[Any]]:
    """The units' blocks by key, each with its reader; a key the spine names is refused."""
    parts = _parts_of()
    clash = sorted(set(parts) & set(BenchData.model_fields))
    if clash:
        raise ValueError(f"bench part {clash[0]!r} is a field of the spine's BenchData")
    return {key: _adapter(shape) for key, shape in parts.items()}


class BenchData(Model):
    """bench.json's data. Engine and launcher details belong here too: add fields, in this
    one place, when bench records more (the report and the schema follow). A benchmark's
    own block is its unit's (`bench_parts_from`): kept under the unit's key, read
    through the unit's model where the bench is imported."""

    model_config = ConfigDict(extra="allow")

    @model_validator(mode="after")
    def _typed_parts(self) -> BenchData:
        """Each registered part read through its unit's model; a part refused by it fails
        the record (a block of another shape is not silently kept)."""
        extra = self.__pydantic_extra__ or {}
        parts = bench_parts() if extra else {}
        for key, value in extra.items():
            shape = parts.get(key)
            if shape is not None and value is not None:
                try:
                    extra[key] = shape.validate_python(value)
                except ValidationError as exc:
                    raise ValueError(f"bench.json data.{key}: {exc}") from None
        return self

    def part(self, key: str) -> Any:
        """A unit's block by its key (typed by its unit's model once registered), None
        where the record has none."""
        return (self.__pydantic_extra__ or {}).get(key)

    mode: Literal["local", "ssh", "slurm"] | None = None
    engine: BenchEngine | None = None
    quick: bool = False
    judge_link: bool | None = Field(
        None, description="The run crossed the spec's link (ssh, or --line-rate-gbps given)"
    )
    thresholds: Certification | None = Field(None, description="spec.certification as judged")
    launches: list[BenchLaunch] = Field(default_factory=list)
    kubernetes: K8sManifests | None = None
    environment: dict[str, Any] = Field(
        default_factory=dict, description="torch, CUDA, NCCL, GPU as the worker reported them"
    )
    resnet50: ScalingResult | None = None
    allreduce: AllreduceResult | None = None
    nccl_transport: NcclTransport | None = Field(
        None, description="The allreduce launch's NCCL transport per rank (NCCL_DEBUG=INFO)"
    )
    launch: LaunchInfo | None = None
    storage: StorageResult | None = None
    localise: LocaliseRecord | None = Field(
        None,
        description="Localisation (validation.bench.localisation.stages): per-node and per-link"
        " figures, the rules, and the findings that name a node, GPU or link",
    )
    units: dict[str, Any] | None = Field(
        None,
        description="Results of benchmarks this schema does not name yet (a unit added to"
        " validation.bench.units.UNITS), by unit name; give a unit a field above to type it",
    )
    warnings: list[str] = Field(
        default_factory=list, description="What went wrong without spoiling a figure"
    )
    verdict: Verdict | None = None


# -- report -------------------------------------------------------------------------------------
class ReportCounts(Model):
    total: int = 0
    passed: int = 0
    failed: int = 0
    error: int = 0
    skipped: int = 0


class ReportData(Model):
    verdict: VerdictWord | None = None
    reasons: list[str] = Field(default_factory=list)
    not_judged: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    matrix: dict[str, Any] = Field(
        default_factory=dict, description="reference id and the matrix's counts"
    )
    checks: ReportCounts = Field(default_factory=ReportCounts)
    missing_stages: list[str] = Field(default_factory=list)


# -- rehearsal ----------------------------------------------------------------------------------
class Refusal(Model):
    """Something that stopped provision on the twin: ESXi's/vCenter's fault, or rackcert's."""

    target: str
    action: str = Field(description="The action's kind, or plan when planning refused")
    by: Literal["vcenter", "rackcert"] = Field(
        description="vcenter: a task or call failed with vCenter's/ESXi's message; rackcert:"
        " the planner refused or apply left the action undone"
    )
    message: str


class CaptureInfo(Model):
    taken_at: str
    file: str = Field(description="The capture, in the run (artifacts/rehearsal/capture.json)")
    sha256: str = Field(description="sha256 of the capture file")
    inventory_digest: str = Field(description="sha256 of the fields provision reads")
    hosts: int = 0
    vms: int = 0
    round_trips: int = 0
    seconds: float = 0.0


class RehearsalData(Model):
    capture: CaptureInfo | None = None
    twin_digest: str = Field("", description="The same digest, of the twin as discovered")
    static: list[str] = Field(default_factory=list, description="What the twin served as data")
    actions: list[ActionRecord] = Field(default_factory=list, description="The plan on the twin")
    done: list[DoneAction] = Field(default_factory=list)
    skipped: list[SkippedAction] = Field(default_factory=list)
    refusals: list[Refusal] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    second_plan: list[ActionRecord] = Field(
        default_factory=list, description="Planned again after apply: empty when it converged"
    )
    seconds: dict[str, float] = Field(default_factory=dict)


# -- upgrade ------------------------------------------------------------------------------------
class Declared:
    """A string one of the names the upgrade layers' declarations give now
    (rackcert.core.upgrade_layers): a state or a layer. Its JSON Schema's enum is read from
    the registry when the schema is made, so a layer registered from outside is recorded,
    validated and published like rackcert's own."""

    def __init__(self, names: Callable[[], tuple[str, ...]], what: str):
        self.names, self.what = names, what

    def _check(self, value: str) -> str:
        if value not in self.names():
            raise ValueError(f"{value!r} is not an upgrade {self.what} ({', '.join(self.names())})")
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> Any:
        return core_schema.no_info_after_validator_function(self._check, handler(str))

    def __get_pydantic_json_schema__(
        self, schema: Any, handler: GetJsonSchemaHandler
    ) -> dict[str, Any]:
        return {"enum": list(self.names()), "type": "string"}


UpgradeNodeState = Annotated[str, Declared(upgrade_layers.node_states, "node state")]
UpgradeHostState = Annotated[str, Declared(upgrade_layers.host_states, "host state")]
UpgradeLayer = Annotated[str, Declared(upgrade_layers.layer_names, "layer")]


class UpgradeStep(Model):
    """One transition of a node or host: written as started before the world is touched,
    then done, skipped or failed, so a re-run knows what it may have left half done."""

    step: str
    status: Literal["started", "done", "skipped", "failed"]
    started_at: str
    ended_at: str = ""
    detail: str = ""


class UpgradeChange(Model):
    layer: UpgradeLayer
    component: str
    before: str | None = None
    after: str | None = None
    hosts: list[str] = Field(default_factory=list)


class UpgradeNode(Model):
    name: str
    host: str
    partitions: list[str] = Field(default_factory=list)
    state: UpgradeNodeState = "pending"
    reason: str = Field("", description="The drain reason Slurm shows, or why it was skipped")
    forced_power_off: bool = Field(
        False, description="The guest did not shut down in time: powered off (recorded)"
    )
    versions_before: dict[str, str] = Field(default_factory=dict)
    versions_after: dict[str, str] = Field(default_factory=dict)
    baseline: dict[str, Any] = Field(
        default_factory=dict,
        description="The node before the roll, measured on it once drained and idle, before"
        " its host went down: versions, checks, figures, floors",
    )
    after: dict[str, Any] = Field(
        default_factory=dict,
        description="The node after the roll (its validate and per-node stage), judged"
        " against `baseline`: versions, checks, figures, floors",
    )
    findings: list[str] = Field(default_factory=list)
    steps: list[UpgradeStep] = Field(default_factory=list)


class UpgradeHost(Model):
    name: str
    nodes: list[str] = Field(default_factory=list)
    state: UpgradeHostState = "pending"
    boot_time_before: str = ""
    boot_time_after: str = ""
    image_before: dict[str, str] = Field(default_factory=dict)
    image_after: dict[str, str] = Field(default_factory=dict)
    steps: list[UpgradeStep] = Field(default_factory=list)


class UpgradeLeftAlone(Model):
    node: str
    reason: str


class UpgradeData(Model):
    """`upgrade.json`: the roll as it goes, rewritten atomically after every transition."""

    mode: Literal["roll", "rollback"] = "roll"
    certified_run: str = Field(description="The run whose spec the roll started from")
    scheduler: Literal["slurm", "hooks", "ask"]
    max_unavailable: str
    max_failures: int
    order: str
    allow_uncertified: bool = False
    uncertified: list[str] = Field(default_factory=list)
    start_verdict: str = Field(
        "", description="The start run's verdict (PASS, FAIL, INCOMPLETE, none)"
    )
    start_failing: list[str] = Field(
        default_factory=list, description="The start run's failing checks: 'node: check status'"
    )
    allow_uncertified_start: bool = Field(
        False, description="Rolled from a start whose verdict is not PASS, as the operator asked"
    )
    changes: list[UpgradeChange] = Field(default_factory=list)
    waves: list[list[str]] = Field(default_factory=list, description="Hosts, wave by wave")
    status: Literal["running", "done", "stopped"] = "running"
    stopped_because: str = ""
    failures: int = 0
    nodes: list[UpgradeNode] = Field(default_factory=list)
    hosts: list[UpgradeHost] = Field(default_factory=list)
    left_alone: list[UpgradeLeftAlone] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    out_of_service_max: dict[str, int] = Field(
        default_factory=dict, description="Per partition, the most nodes out at once, as seen"
    )


# -- the envelope -------------------------------------------------------------------------------
class StageRecord(Model):
    """What every `<stage>.json` carries around its data."""

    schema_version: Literal[1] = SCHEMA_VERSION
    stage: str
    rack: str
    spec_sha256: str = Field(description="sha256 of the spec the producer loaded")
    status: StageStatus
    error: str | None = None
    started_at: str
    finished_at: str
    data: Model


class PlanRecord(StageRecord):
    stage: Literal["plan"] = "plan"
    data: PlanData


class ProvisionRecord(StageRecord):
    stage: Literal["provision"] = "provision"
    data: ProvisionData


class ConfigureRecord(StageRecord):
    stage: Literal["configure"] = "configure"
    data: ConfigureData


class ValidateRecord(StageRecord):
    stage: Literal["validate"] = "validate"
    data: ValidateData


class BenchRecord(StageRecord):
    stage: Literal["bench"] = "bench"
    data: BenchData


class ReportRecord(StageRecord):
    stage: Literal["report"] = "report"
    data: ReportData


class RehearsalRecord(StageRecord):
    stage: Literal["rehearsal"] = "rehearsal"
    data: RehearsalData


class UpgradeRecord(StageRecord):
    stage: Literal["upgrade"] = "upgrade"
    data: UpgradeData


class BurninRecord(StageRecord):
    """burnin.json: `rackcert burnin` (rackcert.core.burnin_record)."""

    stage: Literal["burnin"] = "burnin"
    # BurninData lives in rackcert.core.burnin_record (its own base: this module imports it)
    data: BurninData  # type: ignore[assignment]


RECORDS: dict[str, type[StageRecord]] = {
    "rehearsal": RehearsalRecord,
    "plan": PlanRecord,
    "provision": ProvisionRecord,
    "configure": ConfigureRecord,
    "validate": ValidateRecord,
    "bench": BenchRecord,
    "report": ReportRecord,
    "upgrade": UpgradeRecord,
    "burnin": BurninRecord,
}


def json_schema(stage: str) -> dict[str, Any]:
    """The JSON Schema of `<stage>.json`; bench's with its units' blocks
    (`bench_parts_from`: the CLI imports the units before it prints it)."""
    schema = RECORDS[stage].model_json_schema()
    if stage == "bench":
        _with_bench_parts(schema)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"rackcert:schemas/{stage}.schema.json"
    return schema


def _with_bench_parts(schema: dict[str, Any]) -> None:
    """Each unit's block as a property of BenchData's schema (None allowed, as a block
    a run did not write), its models among the schema's $defs."""
    defs = schema.setdefault("$defs", {})
    props = defs["BenchData"]["properties"]
    for key, shape in sorted(bench_parts().items()):
        part = shape.json_schema(ref_template="#/$defs/{model}")
        defs.update(part.pop("$defs", {}))
        if "$ref" in part and part["$ref"][len("#/$defs/") :] not in defs:
            raise AssertionError(part)  # pragma: no cover - a model is always in $defs
        props[key] = {"anyOf": [part, {"type": "null"}], "default": None, "title": key}
