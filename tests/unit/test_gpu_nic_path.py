"""Item 5: the GPU-to-NIC path in the guest, as `nvidia-smi topo -m` shows it (gpu.nic_path).

PIX, PXB and PHB keep GPUDirect RDMA under one PCIe host bridge and pass; NODE and SYS cross
host bridges or the socket link, which NCCL's defaults do not use for GPUDirect RDMA: a
warning with that reason. The matrices follow the real tool's layout (tab-separated, the
header underlined, a NIC legend), as a VM of the reference rack shows them: s1-pair's NVLink
pair on NUMA node 1 and its ConnectX-6 port on node 0, then a VM whose GPU shares the port's
root complex.
"""

from __future__ import annotations

from rackcert.core.results import Severity, Status
from tests.support.validate_checks import H200, h200_expect, h200_outputs, judge
from validation.probes import ProbeOutput

ESC = "\033"
# The real tool's legend (the captured H200 matrix), then the NIC legend it prints with NICs.
LEGEND = (
    "\n"
    + (H200 / "nvidia-smi-topo-m.txt").read_text().split("\n\n", 1)[1]
    + "\nNIC Legend:\n\n  NIC0: mlx5_0\n"
)


def _topo(rows: dict[str, list[str]]) -> str:
    names = list(rows)
    head = "\t".join(names)
    out = [f"\t{ESC}[4m{head}\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID{ESC}[0m"]
    for name, cells in rows.items():
        out.append(f"{name}\t" + "\t".join(cells) + "\t0-31\t0\t\tN/A")
    return "\n".join(out) + "\n" + LEGEND


def _outputs(text: str):
    outs = h200_outputs()
    outs["gpu_topology"] = ProbeOutput("gpu_topology", 0, text)
    return outs


def test_gpus_across_the_socket_from_the_nic_are_a_warning_with_the_reason():
    text = _topo(
        {
            "GPU0": [" X ", "NV12", "SYS"],
            "GPU1": ["NV12", " X ", "SYS"],
            "NIC0": ["SYS", "SYS", " X "],
        }
    )
    res = judge("gpu.nic_path", h200_expect(gpus=2, rdma=True), _outputs(text))
    assert res.severity is Severity.warning and res.status is Status.failed
    assert res.observed == "GPU0-NIC0 SYS; GPU1-NIC0 SYS"
    assert "socket interconnect (SYS)" in res.reason and "NCCL" in res.reason


def test_node_is_a_warning_and_pix_pxb_phb_pass():
    node = _topo({"GPU0": [" X ", "NODE"], "NIC0": ["NODE", " X "]})
    res = judge("gpu.nic_path", h200_expect(rdma=True), _outputs(node))
    assert res.status is Status.failed and "host bridges (NODE)" in res.reason
    for link in ("PIX", "PXB", "PHB"):
        near = _topo({"GPU0": [" X ", link], "NIC0": [link, " X "]})
        res = judge("gpu.nic_path", h200_expect(rdma=True), _outputs(near))
        assert (res.status, res.observed) == (Status.passed, f"GPU0-NIC0 {link}")


def test_without_an_rdma_nic_the_check_does_not_apply():
    assert judge("gpu.nic_path", h200_expect()).status is Status.skipped
