"""The node's GPUs as nvidia-smi, the CUDA toolkit and DCGM report them."""

from __future__ import annotations

from typing import Any

from validation import parsers
from validation.expect import NodeExpect
from validation.facts.base import Fact

# Query fields of `nvidia-smi --query-gpu` the GPU checks and the report read. FULL needs
# a recent driver; BASE is the subset every R450+ driver knows (the command falls back).
GPU_QUERY_BASE = (
    "index,pci.bus_id,name,uuid,serial,vbios_version,driver_version,memory.total,"
    "persistence_mode,ecc.mode.current,ecc.errors.uncorrected.volatile.total,"
    "ecc.errors.uncorrected.aggregate.total,retired_pages.pending,pcie.link.gen.current,"
    "pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max"
)
GPU_QUERY_FULL = (
    GPU_QUERY_BASE + ",remapped_rows.pending,remapped_rows.failure,pcie.link.gen.gpumax"
)


class GpuQuery(Fact):
    """`nvidia-smi --query-gpu=... --format=csv,nounits`: one dict per GPU, keyed by the
    query's field names ([N/A] is None)."""

    key = "gpus"
    tool = "nvidia-smi"

    def command(self) -> str:
        return (
            f"nvidia-smi --query-gpu={GPU_QUERY_FULL} --format=csv,nounits 2>/dev/null"
            f" || nvidia-smi --query-gpu={GPU_QUERY_BASE} --format=csv,nounits"
        )

    @staticmethod
    def default() -> list[dict[str, str | None]]:
        return []

    def process(self, output: list[str]) -> list[dict[str, str | None]]:
        return parsers.gpu_query_csv("\n".join(output))


class SmiHeader(Fact):
    """The top of `nvidia-smi -q`: the driver version and the CUDA version it supports."""

    key = "nvidia_smi"
    tool = "nvidia-smi"

    def command(self) -> str:
        return "nvidia-smi -q"

    def process(self, output: list[str]) -> parsers.SmiHeader:
        return parsers.smi_header("\n".join(output))


class GpuTopology(Fact):
    """`nvidia-smi topo -m`: the link between each pair of devices (NV#, PIX, SYS...)."""

    key = "gpu_topology"
    tool = "nvidia-smi"

    def command(self) -> str:
        return "nvidia-smi topo -m"

    def process(self, output: list[str]) -> parsers.Topology:
        return parsers.topo_matrix("\n".join(output))


class NvlinkStatus(Fact):
    """`nvidia-smi nvlink -s`: per GPU, the speeds of its active links."""

    key = "nvlink"
    tool = "nvidia-smi"

    def command(self) -> str:
        return "nvidia-smi nvlink -s"

    @staticmethod
    def default() -> list[Any]:
        return []

    def process(self, output: list[str]) -> list[parsers.NvlinkGpu]:
        return parsers.nvlink_status("\n".join(output))


class CudaToolkit(Fact):
    """/usr/local/cuda/version.json, else `nvcc --version`: the toolkit's version (None
    when neither names one)."""

    key = "cuda_toolkit"

    def command(self) -> str:
        return "cat /usr/local/cuda/version.json 2>/dev/null || nvcc --version"

    def process(self, output: list[str]) -> str | None:
        return parsers.cuda_toolkit("\n".join(output))


# DCGM's run levels take about 1, 3, 30 and 90 minutes (DCGM user guide, diagnostics).
DCGM_TIMEOUT_S = {0: 30, 1: 300, 2: 900, 3: 3600, 4: 7200}


class DcgmDiag(Fact):
    """`dcgmi diag -r LEVEL -j`: {version, results: [{test, category, entity, status,
    warnings}]}. dcgmi exits non-zero when a test fails; its JSON is still the answer."""

    key = "dcgm_diag"
    tool = "dcgmi"

    @classmethod
    def args(cls, expect: NodeExpect) -> tuple[int, int]:
        return (int(expect.dcgm_diag_level), expect.gpus)

    @classmethod
    def timeout_s(cls, expect: NodeExpect) -> int | None:
        return DCGM_TIMEOUT_S.get(expect.dcgm_diag_level, 7200) if expect.gpus else 30

    def command(self, level: int = 1, gpus: int = 1) -> str:
        if level == 0 or gpus == 0:
            return "echo 'dcgm diag not asked for'"
        return f"dcgmi diag -r {int(level)} -j"

    def process(self, output: list[str]) -> dict[str, Any]:
        return parsers.dcgm_diag_json("\n".join(output))


FACTS = (GpuQuery, SmiHeader, GpuTopology, NvlinkStatus, CudaToolkit, DcgmDiag)
