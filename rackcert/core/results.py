"""Check and benchmark results: the shapes validate and bench record and the report reads.

The report never re-derives a verdict: it shows what these records say.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

VerdictWord = Literal["PASS", "FAIL", "INCOMPLETE"]

# The thresholds bench judges, a closed set: certification.required names some of them.
VerdictCheckId = Literal[
    "allreduce.correct",
    "allreduce.busbw_fraction",
    "allreduce.nccl_transport",
    "resnet50.scaling_efficiency",
    "resnet50.images_per_gpu",
    "resnet50.loss_finite",
    "storage.read",
]


class Severity(StrEnum):
    error = "error"
    warning = "warning"
    info = "info"


class Status(StrEnum):
    passed = "pass"
    failed = "fail"
    error = "error"
    skipped = "skip"


class CheckResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="Stable check id, e.g. gpu.nvlink.active")
    node: str
    severity: Severity = Severity.error
    status: Status
    observed: str = ""
    expected: str = ""
    fix: str = Field("", description="One-line fix hint")
    reason: str = Field("", description="Why it failed, errored or was skipped")


class AllreducePoint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    size_bytes: int
    count: int
    time_us: float
    algbw_gbps: float = Field(description="GB/s, bytes / time, as nccl-tests")
    busbw_gbps: float = Field(description="algbw x 2(n-1)/n")
    correct: bool
    iters: int | None = Field(None, description="Timed iterations averaged for this size")


class AllreduceResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    backend: str
    device: str
    world_size: int
    dtype: str = "float32"
    points: list[AllreducePoint] = Field(default_factory=list)
    line_rate_gbps: float | None = Field(None, description="Gb/s of the link, from the spec")
    busbw_fraction: float | None = Field(None, description="busbw at the largest sizes / line rate")
    note: str | None = Field(None, description="Caveat for reading the figures, e.g. world size 1")
    link: str | None = Field(
        None,
        description="What the launch's ranks talked over: nvlink, pcie, sys (across sockets),"
        " nic (between nodes) or loopback; absent in records older than the field",
    )
    link_detail: str | None = Field(None, description="The GPU pairs and their links, or nodes")
    link_source: str | None = Field(
        None, description="Where the line rate or expected busbw judged against comes from"
    )
    expected_busbw_gbps: float | None = Field(
        None, description="The spec's expected busbw for this link (GB/s), when it states one"
    )
    busbw_largest_gbps: float | None = Field(
        None, description="Mean busbw of the largest sizes: the figure judged"
    )
    sys_crossing: list[str] = Field(
        default_factory=list,
        description="GPU pairs (or GPU-to-NIC paths) that cross the CPU sockets (SYS)",
    )
    fixed_time_us: float | None = Field(
        None,
        description="What every call cost whatever its size: the median time of the sweep's"
        " sizes up to 4 KiB (the engine's coordination; on CPU ranks, their threads' waits"
        " for a core)",
    )
    busbw_fraction_less_fixed: float | None = Field(
        None,
        description="busbw of the largest sizes with each call's fixed time taken out, over the"
        " line rate: what the link itself carried",
    )
    rank_wait: str | None = Field(
        None,
        description="How each rank waited for its allreduce where the engine leaves that to the"
        " caller (Horovod): its own synchronize, or a poll with naps where more ranks than"
        " cores share a machine; absent where the engine's call blocks (torch.distributed)",
    )


class ScalingPoint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    nodes: int
    gpus: int
    images_per_sec: float = Field(description="Total images/s across all GPUs")
    images_per_sec_per_gpu: float
    spread: float = Field(0.0, description="+- 1.96 sigma of the total over timed intervals")
    intervals: int | None = Field(
        None,
        description="Timed intervals behind the figure: a spread needs two; with one (a quick"
        " CPU path check) there is none, and the report shows '-', not 0",
    )
    warmup_s: float | None = Field(
        None, description="Seconds of warm-up steps (compilation included), excluded from the rate"
    )
    speedup: float = 1.0
    efficiency: float = 1.0


class ScalingResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = "resnet50"
    batch_per_gpu: int
    precision: str
    channels_last: bool
    compiled: bool = False
    device: str
    points: list[ScalingPoint] = Field(default_factory=list)
    backend: str | None = Field(None, description="Engine: nccl, gloo or horovod")
    baseline: str | None = Field(None, description="What speedup is relative to, e.g. '1 GPU'")


class VerdictCheck(BaseModel):
    """One threshold judged: what was seen against what the spec asks.

    status skip means "not judged" (nothing measured, no threshold, or nothing to compare):
    never a pass. A required check that is not judged makes the verdict INCOMPLETE.
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="Stable id, e.g. resnet50.scaling_efficiency")
    status: Status
    observed: str = ""
    expected: str = ""
    reason: str = Field("", description="Why it was not judged (status skip)")
    required: bool = Field(False, description="Listed in certification.required")


class Verdict(BaseModel):
    """Bench's verdict: FAIL when a check failed, INCOMPLETE when a required check was not
    judged or nothing was judged at all, PASS otherwise. `passed` is verdict == PASS."""

    model_config = ConfigDict(extra="forbid")

    verdict: VerdictWord
    passed: bool
    reasons: list[str] = Field(default_factory=list, description="One line per failed check")
    not_judged: list[str] = Field(
        default_factory=list, description="One line per check not judged, with why"
    )
    required: list[str] = Field(
        default_factory=list, description="The checks whose skip makes the verdict INCOMPLETE"
    )
    checks: list[VerdictCheck] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _older_records(cls, raw: object) -> object:
        """Records from before the three-way verdict carry only `passed`; a PASS there said
        nothing about what was skipped, so it reads as INCOMPLETE, never as PASS."""
        if isinstance(raw, dict) and "verdict" not in raw and "passed" in raw:
            word = "INCOMPLETE" if raw["passed"] else "FAIL"
            return {**raw, "verdict": word, "passed": False}
        return raw

    @model_validator(mode="after")
    def _consistent(self) -> Verdict:
        if self.passed != (self.verdict == "PASS"):
            raise ValueError(f"passed={self.passed} disagrees with verdict {self.verdict}")
        return self
