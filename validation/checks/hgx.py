"""HGX VM checks: a vGPU guest on an NVSwitch board's partition, as NVIDIA documents it.

The VM's GPUs are vGPUs (licensed through NVIDIA's licensing client), its GPUs form one
Fabric Manager partition (NVLink between every pair, every link of every GPU up), and the
fabric is trained where the guest reports it. Expectations come from the spec through
`validation.expect` (vgpu, partition, nvlink_links, nvlink_gbps).
"""

from __future__ import annotations

from itertools import combinations

from validation.checks import NodeView, Outcome, check, failed, passed, skipped
from validation.facts.gpu import GpuTopology, NvlinkStatus, SmiHeader

# A link counts as up at its speed within this fraction (nvidia-smi prints 3 decimals).
SPEED_TOLERANCE = 0.005


@check("gpu.vgpu.license", facts=(SmiHeader,))
def vgpu_license(view: NodeView) -> Outcome:
    """Every vGPU reports "License Status : Licensed" in nvidia-smi -q.

    Fix: put the licensing client configuration token in /etc/nvidia/ClientConfigToken/ and
    restart nvidia-gridd; check that the VM reaches the license server.
    """
    if not view.expect.vgpu:
        return skipped("the VM's GPUs are not vGPUs", "no licence needed")
    gpus = view.fact(SmiHeader).gpus
    seen = [f"{g.bus_id}: {g.license_status or 'no licence section'}" for g in gpus]
    expected = "Licensed on every vGPU"
    if len(gpus) != view.expect.gpus:
        return failed(
            "; ".join(seen) or "no GPUs", expected, f"{len(gpus)} GPU(s) in nvidia-smi -q"
        )
    bad = [
        s
        for g, s in zip(gpus, seen, strict=True)
        if not (g.license_status or "").startswith("Licensed")
    ]
    if bad:
        return failed("; ".join(seen), expected, "unlicensed vGPU: " + "; ".join(bad))
    return passed("; ".join(seen), expected)


@check("gpu.nvlink.links", facts=(NvlinkStatus,))
def nvlink_links(view: NodeView) -> Outcome:
    """Every NVLink of every GPU is up at its speed (H100/H200 SXM: 18 links at 26.562 GB/s).

    Fix: a link down on an NVSwitch board is a hardware or fabric fault: check nv-fabricmanager
    on the host side, reset the GPU, and have the board serviced if it stays down.
    """
    want, gbps = view.expect.nvlink_links, view.expect.nvlink_gbps
    if not want or gbps is None:
        return skipped("the spec expects no per-link NVLink figures here", "not judged")
    links = view.fact(NvlinkStatus)
    expected = f"{view.expect.gpus} GPU(s) x {want} links at {gbps:g} GB/s"
    seen, bad = [], []
    for g in links:
        slow = [s for s in g.active if s < gbps * (1 - SPEED_TOLERANCE)]
        seen.append(f"GPU{g.index}: {len(g.active)} up, {g.inactive} down")
        if len(g.active) < want or g.inactive or slow:
            bad.append(
                f"GPU{g.index} {len(g.active)}/{want} up"
                + (f", {len(slow)} below {gbps:g} GB/s" if slow else "")
            )
    if len(links) != view.expect.gpus:
        bad.append(f"{len(links)} GPU(s) in nvidia-smi nvlink -s")
    if bad:
        return failed("; ".join(seen) or "no GPUs", expected, "; ".join(bad))
    return passed("; ".join(seen), expected)


@check("gpu.topo.partition", facts=(GpuTopology,))
def topo_partition(view: NodeView) -> Outcome:
    """`nvidia-smi topo -m` shows NV# between every two GPUs of the VM's partition.

    Fix: the VM's GPUs must be one Fabric Manager partition (rackcert plan shows it); a PCIe
    path between two of them means the partition was not activated over NVLink.
    """
    if view.expect.partition is None or view.expect.gpus < 2:
        return skipped("no multi-GPU Fabric Manager partition in this VM", "not judged")
    topo = view.fact(GpuTopology)
    gpus = topo.gpus()
    expected = f"NV# between all {view.expect.gpus} GPUs (partition {view.expect.partition})"
    pairs = {f"{a}-{b}": topo.link(a, b) or "?" for a, b in combinations(gpus, 2)}
    observed = ", ".join(f"{k} {v}" for k, v in pairs.items()) or "no GPU pairs"
    not_nv = [f"{k} {v}" for k, v in pairs.items() if not v.startswith("NV")]
    if len(gpus) != view.expect.gpus:
        return failed(observed, expected, f"{len(gpus)} GPU(s) in topo -m")
    if not_nv:
        return failed(observed, expected, "not over NVLink: " + ", ".join(not_nv))
    return passed(observed, expected)


@check("gpu.fabric", facts=(SmiHeader,))
def fabric(view: NodeView) -> Outcome:
    """Where the guest reports the fabric, every GPU's is State Completed, Status Success.

    Fix: the NVSwitch fabric did not train the GPU: check nv-fabricmanager's log for the
    partition, then reset the GPUs of the partition.
    """
    if view.expect.partition is None:
        return skipped("the VM's GPUs are not on an NVSwitch board", "not judged")
    gpus = view.fact(SmiHeader).gpus
    expected = "Fabric State Completed, Status Success"
    seen = [f"{g.bus_id}: {g.fabric_state}/{g.fabric_status}" for g in gpus]
    reported = [g for g in gpus if g.fabric_state not in (None, "N/A")]
    if not reported:
        return skipped("the guest does not report the fabric (N/A)", expected)
    bad = [
        s
        for g, s in zip(gpus, seen, strict=True)
        if g in reported and (g.fabric_state, g.fabric_status) != ("Completed", "Success")
    ]
    if bad:
        return failed("; ".join(seen), expected, "fabric not trained: " + "; ".join(bad))
    return passed("; ".join(seen), expected)
