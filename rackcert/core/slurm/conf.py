"""The lines a site adds to its slurm.conf for the rack: NodeName, PartitionName, health check.

Why printed, not written: rackcert does not own the controller's configuration (the site
keeps it, often in its own configuration management); it says what the rack's nodes are.
Pure functions of the spec, so `rackcert slurm conf` and the lab write the same lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rackcert.core.errors import InputError
from rackcert.core.spec import Slurm, Spec, Vm

# The guest kernel and firmware keep part of a VM's memory; Slurm drains a node whose
# RealMemory exceeds what slurmd finds, so the line asks for 95 % of the template's.
MEMORY_FRACTION = 0.95
# Slurm kills a HealthCheckProgram after 60 s (slurm.conf(5), HealthCheckProgram); the
# check's own budget is 30 s. Run every 5 minutes on every node state but ALLOC's.
HEALTH_CHECK_INTERVAL_S = 300


@dataclass(frozen=True)
class NodeLine:
    """One node as slurm.conf describes it."""

    name: str
    address: str
    cpus: int
    memory_mb: int
    gres: str | None

    def line(self) -> str:
        text = f"NodeName={self.name} NodeAddr={self.address} CPUs={self.cpus}"
        text += f" RealMemory={self.memory_mb}"
        return text + (f" Gres={self.gres}" if self.gres else "") + " State=UNKNOWN"


def need_slurm(spec: Spec) -> Slurm:
    """The spec's slurm block, or one clear error naming what is missing."""
    if spec.slurm is None:
        raise InputError(f"spec {spec.metadata.name}: no slurm block (controller, cluster, ...)")
    return spec.slurm


def gres_type(spec: Spec, vm: Vm) -> str:
    """Type of the VM's GPUs for Gres=gpu:<type>:<n>: the spec's, else the model's family
    (`NVIDIA A100 PCIe 80GB` -> a100, `NVIDIA H200` -> h200), as NVML names them lower-case."""
    if spec.slurm is not None and spec.slurm.gres_type:
        return spec.slurm.gres_type
    profiles = [spec.host_profile(vm.host)] if vm.host != "auto" else spec.hardware_profiles
    for profile in profiles:
        for gpu in profile.gpus:
            found = re.search(r"\b([A-Z]{1,3}[0-9]{2,4}[A-Z]?)\b", gpu.model)
            if found:
                return found.group(1).lower()
    return "gpu"


def node_lines(spec: Spec, *, gres: bool = True) -> list[NodeLine]:
    """One NodeName per VM: CPUs and RealMemory from its template, its GPUs as Gres."""
    out = []
    for vm in spec.vms:
        template = spec.template(vm.template)
        gpus = template.gpus if gres else 0
        out.append(
            NodeLine(
                name=vm.name,
                address=vm.address,
                cpus=template.vcpus,
                memory_mb=int(template.memory_gb * 1024 * MEMORY_FRACTION),
                gres=f"gpu:{gres_type(spec, vm)}:{gpus}" if gpus else None,
            )
        )
    return out


def partition_line(spec: Spec) -> str:
    slurm = need_slurm(spec)
    names = ",".join(vm.name for vm in spec.vms)
    return f"PartitionName={slurm.partition} Nodes={names} MaxTime=INFINITE State=UP"


def site_lines(spec: Spec) -> list[str]:
    """What `rackcert slurm conf` prints: GresTypes when any node has GPUs, the node lines,
    the partition line."""
    need_slurm(spec)
    if not spec.vms:
        raise InputError(f"spec {spec.metadata.name}: no vms, so no nodes for slurm.conf")
    nodes = node_lines(spec)
    head = ["GresTypes=gpu"] if any(n.gres for n in nodes) else []
    if spec.network.firewall.firewalld is not None:
        # srun listens on ports the kernel picks unless SrunPortRange bounds them
        # (slurm.conf(5): for a firewall between the nodes); the slurm_node role opens it.
        head.append(f"SrunPortRange={spec.network.firewall.srun_port_range}")
    return [*head, *(n.line() for n in nodes), partition_line(spec)]


def health_check_script(rackcert: str, spec_on_node: str) -> str:
    """The wrapper Slurm runs: it passes no arguments to a HealthCheckProgram or Prolog."""
    return (
        "#!/bin/sh\n"
        "# rackcert's health check (rackcert slurm health-check-conf); Slurm gives it\n"
        "# SLURMD_NODENAME and nothing else.\n"
        f"exec {rackcert} -q validate {spec_on_node} --health-check\n"
    )


def health_check_lines(program: str) -> list[str]:
    """slurm.conf lines that make the wrapper Slurm's health check and prolog: every 5
    minutes on every node whatever its state (HealthCheckNodeState=ANY: a drained node is
    checked too, so a repaired one comes back), and before each job (a failing prolog drains
    the node and requeues the job)."""
    return [
        f"HealthCheckProgram={program}",
        f"HealthCheckInterval={HEALTH_CHECK_INTERVAL_S}",
        "HealthCheckNodeState=ANY",
        f"Prolog={program}",
    ]
