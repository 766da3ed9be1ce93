"""burnin.json's data: what a burn-in ran, what it watched (compressed), what it found.

Why its own module: the burn-in record is read by the report (plots, findings table), the
metrics (`rackcert_burnin_*`) and `--drain`; the node's raw series can be hours long, so
it is kept as zlib-compressed JSON (base64) beside the findings, and each reader asks
`BurninData.series()` for it.

    rec = BurninRecord.model_validate_json(Path(".../burnin.json").read_text())
    rec.data.findings[0].message
"""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

FindingKind = Literal[
    "gpu", "hbm", "xid", "port", "nvlink", "pcie", "allreduce", "nccl", "link", "node"
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BurninFinding(_Model):
    """One part named, with what a vendor RMA asks for: serial, PCI address, port or link,
    the counter before and after, and when it was seen (seconds from the start)."""

    id: str = Field(description="Stable id: burnin.<rule>[<node>/<part>]")
    rule: str
    kind: FindingKind
    node: str
    part: str = Field(description="GPU serial, port (device/port), link (a<->b), or the node")
    serial: str | None = None
    pci: str | None = None
    before: Any = None
    after: Any = None
    at_s: float | None = Field(None, description="Seconds from the start it was first seen")
    message: str


class Reported(_Model):
    """Seen and reported, not a finding (the SW power cap under a GEMM at the cap)."""

    node: str
    part: str
    what: str
    share: float | None = None


class GpuSummary(_Model):
    node: str
    index: int
    serial: str | None = None
    pci: str | None = None
    name: str | None = None
    power_limit_w: float | None = None
    power_max_w: float | None = None
    temp_max_c: float | None = None
    sm_mhz_median: float | None = None
    first_tflops: float | None = None
    last_tflops: float | None = None
    reasons_seen: list[str] = Field(default_factory=list)
    hbm_passes: int = 0
    hbm_fraction_of_free: float | None = None


class AllreduceLoop(_Model):
    """One allreduce loop's intervals: the node's own, or the rack's."""

    name: str
    nodes: list[str]
    backend: str | None = None
    interval_s: float
    busbw_gb_s: list[float] = Field(default_factory=list)
    median_gb_s: float | None = None
    starts: list[float] = Field(default_factory=list, description="Each interval's start, epoch s")
    excluded: list[int] = Field(
        default_factory=list, description="Intervals during a pair round: recorded, not judged"
    )
    paused: list[list[float]] = Field(
        default_factory=list, description="[from, to] epoch s: the loop paused for a pair round"
    )
    error: str | None = None


class NcclRank(_Model):
    """What NCCL_DEBUG=INFO said of one rank: version, transport per peer, GPUDirect RDMA."""

    rank: str
    version: str | None = None
    transports: dict[str, str] = Field(default_factory=dict)
    net: str | None = None
    gdr: bool = False


class NodeRun(_Model):
    node: str
    device: str
    nvml: bool
    driver: str | None = None
    duration_s: float
    interval_s: float
    samples: int
    error: str | None = None
    notes: list[str] = Field(default_factory=list)


class BurninData(_Model):
    schema_: Literal[1] = Field(1, alias="schema")
    duration_s: float
    quick: bool
    launcher: str
    mix: list[str]
    rules: dict[str, Any]
    nodes: list[NodeRun] = Field(default_factory=list)
    gpus: list[GpuSummary] = Field(default_factory=list)
    loops: list[AllreduceLoop] = Field(default_factory=list)
    nccl: list[NcclRank] = Field(default_factory=list)
    pair_rounds: list[dict[str, Any]] = Field(default_factory=list)
    findings: list[BurninFinding] = Field(default_factory=list)
    reported: list[Reported] = Field(default_factory=list)
    unmeasured: list[str] = Field(default_factory=list)
    verdict: Literal["PASS", "FAIL"]
    series_zlib_b64: str = Field("", description="Each node's series and counters, zlib JSON")
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def series(self) -> dict[str, Any]:
        """Each node's series and counters by node name (see validation.bench.node.burnin)."""
        if not self.series_zlib_b64:
            return {}
        raw = zlib.decompress(base64.b64decode(self.series_zlib_b64))
        out = json.loads(raw)
        return out if isinstance(out, dict) else {}


def pack_series(by_node: dict[str, Any]) -> str:
    """Each node's series and counters, compressed for burnin.json (a 4-hour run at 1 s on
    eight GPUs is ~1 M numbers; zlib takes repeated clocks and flags down to a fraction)."""
    raw = json.dumps(by_node, separators=(",", ":")).encode()
    return base64.b64encode(zlib.compress(raw, 6)).decode()
