"""Which link an allreduce launch crossed, and what that link should carry.

Why: `certification.allreduce_busbw_fraction_min` means nothing against the wrong link. Two
GPUs of one VM joined by an NVLink bridge move about twenty times what a 100 GbE port
does; a launch across nodes is bounded by the NIC. So each launch's link is read from what
the ranks saw (their hosts; `nvidia-smi topo -m` between their GPUs on rank 0's node) and
judged against that link's figure: the spec's own (`certification.links`, with its source),
else a shipped figure that names its source, else the launch is not judged and says why.
GPUs that talk through SYS (across the CPU sockets' interconnect) are flagged beside the
figure: a placement or NUMA mistake more often than a hardware fault.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rackcert.core.spec import Certification, LinkExpectation
from validation.parsers import ParseError, topo_matrix

# NVLink figures in NVIDIA's datasheets are both directions added; nccl-tests' busbw is what
# one direction carries, so the line rate is half of it, in Gb/s (x 8).
_NV = "NVIDIA datasheet, {part}: NVLink {total} GB/s in both directions, so {half} GB/s each way"
SHIPPED: tuple[LinkExpectation, ...] = (
    LinkExpectation(
        topology="nvlink",
        gpu="A100",
        line_rate_gbps=300 * 8,
        source=_NV.format(
            part="A100 Tensor Core GPU (PCIe card: 'NVIDIA NVLink Bridge for 2 GPUs')",
            total=600,
            half=300,
        ),
    ),
    LinkExpectation(
        topology="nvlink",
        gpu="H100 PCIe",
        line_rate_gbps=300 * 8,
        source=_NV.format(part="H100 PCIe (NVLink bridge)", total=600, half=300),
    ),
    LinkExpectation(
        topology="nvlink",
        gpu="H100 NVL",
        line_rate_gbps=300 * 8,
        source=_NV.format(part="H100 NVL (NVLink bridge)", total=600, half=300),
    ),
    LinkExpectation(
        topology="nvlink",
        gpu="H100",
        line_rate_gbps=450 * 8,
        source=_NV.format(part="H100 SXM", total=900, half=450),
    ),
    LinkExpectation(
        topology="nvlink",
        gpu="H200",
        line_rate_gbps=450 * 8,
        source=_NV.format(part="H200 SXM and H200 NVL", total=900, half=450),
    ),
    LinkExpectation(
        topology="pcie",
        gpu="A100",
        line_rate_gbps=252,
        source="PCI Express 4.0 x16 (the A100 PCIe card's host interface): 16 GT/s per lane,"
        " 128b/130b encoding, 252 Gb/s (31.5 GB/s) each way",
    ),
)
NIC_SOURCE = "the spec's NIC port speed (hardware_profiles[].nics[].speed_gbps, the slowest)"
OVERRIDE_SOURCE = "certification.line_rate_gbps"
OPTION_SOURCE = "--line-rate-gbps"
_NV_RE = re.compile(r"^NV\d+$")


@dataclass
class LaunchLink:
    """The link one launch's ranks talked over, as far as the ranks could tell."""

    topology: str | None  # nvlink | pcie | sys | nic | loopback | None (one rank: no link)
    detail: str = ""
    gpu: str | None = None
    sys_pairs: list[str] = field(default_factory=list)


def classify(kinds: Iterable[str]) -> str | None:
    """The link of a set of GPU pairs: nvlink when every pair is NV#, sys when any pair
    crosses sockets (the slowest decides), else pcie; None for no pair."""
    kinds = list(kinds)
    if not kinds:
        return None
    if any(k == "SYS" for k in kinds):
        return "sys"
    if all(_NV_RE.match(k) for k in kinds):
        return "nvlink"
    return "pcie"


def gpu_pairs(environment: dict[str, Any], bus_ids: list[str]) -> dict[str, str] | None:
    """'GPUa-GPUb' -> link (NV12, PIX, SYS...) between the GPUs of rank 0's node that the
    launch used (found by PCI bus id); None when the node gave no topology."""
    text = environment.get("topo_m")
    index = environment.get("gpu_index_by_bus_id") or {}
    if not text or not bus_ids:
        return None
    try:
        topo = topo_matrix(text)
    except ParseError:
        return None
    names = sorted({f"GPU{index[b]}" for b in bus_ids if b in index})
    out: dict[str, str] = {}
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            kind = topo.link(a, b)
            if kind:
                out[f"{a}-{b}"] = kind
    return out


def gpu_nic_sys(environment: dict[str, Any], bus_ids: list[str]) -> list[str]:
    """GPUs of rank 0's node whose every NIC is across the sockets (SYS): traffic between
    nodes then crosses the CPUs' interconnect before the NIC (no GPUDirect RDMA path)."""
    text = environment.get("topo_m")
    index = environment.get("gpu_index_by_bus_id") or {}
    if not text:
        return []
    try:
        topo = topo_matrix(text)
    except ParseError:
        return []
    nics = [d for d in topo.devices if not d.startswith("GPU")]
    out = []
    for b in bus_ids:
        gpu = f"GPU{index[b]}" if b in index else None
        links = [topo.link(gpu, n) for n in nics] if gpu else []
        if links and all(k == "SYS" for k in links):
            out.append(f"{gpu}-NICs SYS")
    return out


def launch_link(raw: dict[str, Any]) -> LaunchLink:
    """The link of the launch that gave `raw` (a worker's answer: ranks, environment)."""
    ranks = raw.get("ranks") or []
    env = raw.get("environment") or {}
    gpu = env.get("gpu")
    hosts = {r.get("host") for r in ranks}
    first = ranks[0].get("host") if ranks else None
    local = [r["bus_id"] for r in ranks if r.get("host") == first and r.get("bus_id")]
    if len(hosts) > 1:
        sys_pairs = gpu_nic_sys(env, local)
        return LaunchLink("nic", f"{len(hosts)} nodes", gpu, sys_pairs)
    if len(ranks) < 2:
        return LaunchLink(None, "one rank", gpu)
    if raw.get("device") != "cuda" or not local:
        return LaunchLink("loopback", "ranks on one machine's CPUs", gpu)
    pairs = gpu_pairs(env, local)
    if not pairs:
        return LaunchLink(None, "no GPU topology from the node (nvidia-smi topo -m)", gpu)
    detail = ", ".join(f"{k} {v}" for k, v in sorted(pairs.items()))
    sys_pairs = [f"{k} SYS" for k, v in sorted(pairs.items()) if v == "SYS"]
    return LaunchLink(classify(pairs.values()), detail, gpu, sys_pairs)


def expectation(
    link: LaunchLink,
    cert: Certification,
    nic_gbps: float | None,
    option_gbps: float | None = None,
) -> LinkExpectation | None:
    """The figure the launch is judged against: --line-rate-gbps, then the spec's
    certification.links (first match), then for nic the line-rate override or the NIC port
    speed, then rackcert's shipped figures; None when nothing is known for that link."""
    topo = link.topology
    if topo is None or topo == "loopback":
        return None
    if option_gbps:
        return LinkExpectation(topology=topo, line_rate_gbps=option_gbps, source=OPTION_SOURCE)

    def fits(e: LinkExpectation) -> bool:
        return e.topology == topo and (e.gpu is None or (e.gpu in (link.gpu or "")))

    spec_own = next((e for e in cert.links if fits(e)), None)
    if spec_own is not None:
        return spec_own
    if topo == "nic":
        if cert.line_rate_gbps:
            return LinkExpectation(
                topology="nic", line_rate_gbps=cert.line_rate_gbps, source=OVERRIDE_SOURCE
            )
        if nic_gbps:
            return LinkExpectation(topology="nic", line_rate_gbps=nic_gbps, source=NIC_SOURCE)
        return None
    return next((e for e in SHIPPED if fits(e)), None)
