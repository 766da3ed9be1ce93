"""Why a lab run fails: each failing check of the demo, sorted by a cause a newcomer can read.

Why: the lab has no GPUs, no OFED and no RDMA NICs, and its "nodes" share this machine's CPU
cores, so its verdict cannot be PASS. A FAIL with unexplained lines makes a reader doubt the
rest, so every failing check (validate's and bench's) is put in one of three kinds:

- the lab's missing hardware: the tool of absent hardware is not there to answer
  (nvidia-smi, ofed_info...), or what the cuda role installs only on a GPU node is absent;
- the lab's shared CPU: ResNet50 weak scaling where more ranks run than this machine has
  cores (adding a node adds no compute, so efficiency cannot be linear); allreduce busbw
  below the rule where more ranks run than there are cores AND the figure with each call's
  fixed time taken out meets the rule (the link carried its rate; what was lost is every
  call's wait for the ranks' threads to get a core: the small sizes' time, measured in the
  same sweep). Measured (benchmarks/allreduce_paths.py): Horovod's Gloo path sends a ring's
  bytes over the link (1.5 x size per node for 4 ranks), the same as torch.distributed's,
  and lost its figure to that fixed time alone while its ranks waited in hvd.synchronize's
  sched_yield loop; the bench's Horovod ranks nap between polls where they outnumber the
  cores (validation.bench.node.comm), which held it at 0.96-1.01 in the same rounds;
- a finding: anything else, shown with what was observed, because the lab did not explain it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from rackcert.core.results import CheckResult

# What a lab without hardware cannot have: GPUs, MLNX_OFED, RDMA NICs. A check fails for that
# reason alone when the tool of the missing hardware is not there to answer it.
LAB_ABSENT_TOOLS = ("nvidia-smi", "ofed_info", "ibdev2netdev", "mlxconfig", "nvidia-ctk", "dcgmi")
# The cuda role installs the toolkit where the node has an NVIDIA GPU (cuda_install: auto,
# playbooks/roles/cuda/defaults/main.yml); the lab's nodes have none, so none is installed.
_NO_TOOLKIT = "no CUDA toolkit found"
FINDINGS_SHOWN = 10


def lab_limited(result: CheckResult) -> bool:
    """A failing check whose only reason is that a GPU, OFED or RDMA part is absent."""
    if result.status.value not in ("fail", "error"):
        return False
    if result.id == "gpu.cuda.toolkit" and (
        result.reason.startswith(_NO_TOOLKIT) or "nvcc: not found" in result.reason
    ):
        return True
    return any(result.reason.startswith(f"{tool} not found") for tool in LAB_ABSENT_TOOLS)


@dataclass
class BenchFailure:
    """One failing check of bench.json's verdict (bench checks carry no node); for the
    allreduce check, the figures that tell the lab's shared CPU from the link (AllreduceResult's
    world_size, fixed_time_us, busbw_fraction_less_fixed) and the rule's minimum."""

    id: str
    observed: str
    ranks: int | None = None
    fixed_time_us: float | None = None
    fraction_less_fixed: float | None = None
    fraction_min: float | None = None

    def link_held(self, cores: int) -> bool:
        """The allreduce's shortfall is the shared CPU's alone: more ranks than cores, and
        with each call's fixed time taken out the figure meets the rule."""
        return (
            self.id == "allreduce.busbw_fraction"
            and self.ranks is not None
            and self.ranks > cores
            and self.fixed_time_us is not None
            and self.fraction_less_fixed is not None
            and self.fraction_min is not None
            and self.fraction_less_fixed >= self.fraction_min
        )


@dataclass
class LabExplanation:
    """The failing checks of a lab run, by cause."""

    failing: int = 0
    hardware: list[CheckResult] = field(default_factory=list)
    shared_cpu: list[BenchFailure] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)

    def lines(self, cores: int | None = None) -> list[str]:
        """What the demo's summary prints: one line per cause, one per finding."""
        cores = cores or os.cpu_count() or 1
        out = []
        if self.hardware:
            out.append(
                f"the lab has no GPUs, OFED or InfiniBand: {len(self.hardware)} of the"
                f" {self.failing} failing check(s) fail for that reason alone"
                f" ({', '.join(LAB_ABSENT_TOOLS)} absent; no GPU, so the cuda role installs"
                " no toolkit), so its verdict cannot be PASS; on a real rack those checks"
                " judge the hardware."
            )
        for bench in self.shared_cpu:
            if bench.id == "allreduce.busbw_fraction":
                out.append(_allreduce_line(bench, cores))
                continue
            out.append(
                f"{bench.id} ({bench.observed}): the lab's ranks share this machine's {cores}"
                " CPU core(s), so a second node adds no compute and weak scaling cannot be"
                " linear here; on a rack every GPU is its own."
            )
        shown = self.findings[:FINDINGS_SHOWN]
        for finding in shown:
            out.append(f"not explained by the lab (a finding; see the report): {finding}")
        if len(self.findings) > len(shown):
            out.append(f"... and {len(self.findings) - len(shown)} more finding(s) in the report")
        return out


def _allreduce_line(bench: BenchFailure, cores: int) -> str:
    """The shared CPU's line for the allreduce check, with the figures that show it."""
    assert bench.fixed_time_us is not None and bench.fraction_less_fixed is not None
    return (
        f"{bench.id} ({bench.observed}): every call cost {bench.fixed_time_us / 1000:.3g} ms"
        f" whatever its size (the sweep's sizes up to 4 KiB) with {bench.ranks} ranks on this"
        f" machine's {cores} CPU core(s); with that taken out busbw is"
        f" {bench.fraction_less_fixed:.3g} of the line rate (the rule: {bench.fraction_min:g}),"
        " so the link carried its rate and the ranks waited for cores; on a rack every rank"
        " has its own."
    )


def _gpus_in(observed: str) -> int | None:
    """'0.414 at 4 GPUs (2 node(s))' -> 4."""
    words = observed.split()
    for i, word in enumerate(words[:-1]):
        if word == "at" and words[i + 1].isdigit():
            return int(words[i + 1])
    return None


def explain(
    validate: Iterable[CheckResult],
    bench: Iterable[BenchFailure],
    *,
    cores: int | None = None,
) -> LabExplanation:
    """Sort a lab run's failing checks by cause (`cores`: this machine's, by default)."""
    cores = cores or os.cpu_count() or 1
    result = LabExplanation()
    for r in validate:
        if r.status.value not in ("fail", "error"):
            continue
        result.failing += 1
        if lab_limited(r):
            result.hardware.append(r)
        else:
            seen = r.observed or r.reason or r.status.value
            result.findings.append(f"{r.node} {r.id}: {seen} (expected {r.expected or '-'})")
    for b in bench:
        ranks = _gpus_in(b.observed)
        scaling = b.id == "resnet50.scaling_efficiency" and ranks is not None and ranks > cores
        if scaling or b.link_held(cores):
            result.shared_cpu.append(b)
        else:
            result.findings.append(f"bench {b.id}: {b.observed}")
    return result
