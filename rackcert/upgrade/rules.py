"""The spec's rules for a node's own figures: the floors the roll holds a node to after it.

The per-node stage's figures (rackcert.upgrade.evidence: each unit's GEMM and copy rates,
the node's own allreduce) are judged by localisation against the rack's median only; the
one absolute rule the spec gives for them is the expected allreduce busbw of the link the
node's GPUs talk over (certification.links, `busbw_gbps`: nccl-tests' busbw, GB/s), inside
one VM an NVLink bridge or PCIe: the first entry for that topology (and the node's GPU,
where the entry names one) that gives `busbw_gbps`. The certified matrix gives no per-node
figure (its reference results are whole-rack ResNet50 rates), so it adds none here.

    floors = node_floors(spec)   # {"lab-node1": {"node_allreduce.busbw_gb_s": 150.0}, ...}
"""

from __future__ import annotations

from rackcert.core.spec import Spec

NODE_ALLREDUCE = "node_allreduce.busbw_gb_s"


def _topology(spec: Spec, vm_template: str) -> str | None:
    """The link inside the VM its ranks talk over: nvlink (a bridged pair asked), pcie, or
    None for a VM of fewer than two GPUs (no allreduce inside it)."""
    tmpl = spec.template(vm_template)
    if tmpl.gpus < 2:
        return None
    return "pcie" if str(getattr(tmpl.nvlink, "value", tmpl.nvlink)) == "none" else "nvlink"


def node_floors(spec: Spec) -> dict[str, dict[str, float]]:
    """node -> {figure name: the spec's minimum}; a node with no rule is absent."""
    out: dict[str, dict[str, float]] = {}
    for vm in spec.vms:
        topology = _topology(spec, vm.template)
        if topology is None:
            continue
        models = set()
        if vm.host != "auto":
            models = {g.model for g in spec.profile(spec.host(vm.host).profile).gpus}
        for link in spec.certification.links:
            if link.topology != topology or link.busbw_gbps is None:
                continue
            if link.gpu and not any(link.gpu in m for m in models):
                continue
            out[vm.name] = {NODE_ALLREDUCE: link.busbw_gbps}
            break
    return out
