"""Check and benchmark results: the shapes validate and bench record and the report reads.

The report never re-derives a verdict: it shows what these records say.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


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
    size_bytes: int
    count: int
    time_us: float
    algbw_gbps: float = Field(description="GB/s, bytes / time, as nccl-tests")
    busbw_gbps: float = Field(description="algbw x 2(n-1)/n")
    correct: bool
    iters: int | None = Field(None, description="Timed iterations averaged for this size")


class AllreduceResult(BaseModel):
    backend: str
    device: str
    world_size: int
    dtype: str = "float32"
    points: list[AllreducePoint] = Field(default_factory=list)
    line_rate_gbps: float | None = Field(None, description="Gb/s of the link, from the spec")
    busbw_fraction: float | None = Field(None, description="busbw at the largest sizes / line rate")
    note: str | None = Field(None, description="Caveat for reading the figures, e.g. world size 1")


class ScalingPoint(BaseModel):
    nodes: int
    gpus: int
    images_per_sec: float = Field(description="Total images/s across all GPUs")
    images_per_sec_per_gpu: float
    spread: float = Field(0.0, description="+- 1.96 sigma of the total over timed intervals")
    speedup: float = 1.0
    efficiency: float = 1.0


class ScalingResult(BaseModel):
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
    """One threshold judged: what was seen against what the spec asks."""

    id: str = Field(description="Stable id, e.g. resnet50.scaling_efficiency")
    status: Status
    observed: str = ""
    expected: str = ""
    reason: str = ""


class Verdict(BaseModel):
    passed: bool
    reasons: list[str] = Field(default_factory=list, description="One line per failed check")
    checks: list[VerdictCheck] = Field(default_factory=list)
