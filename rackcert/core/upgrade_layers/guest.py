"""The guest layer: the NVIDIA driver, CUDA, OFED/DOCA, the container toolkit and NCCL
(guest.*), installed by site.yml's roles limited to the node and to the roles that move the
components that change (`tags`): a driver-only roll does not rerun the NFS, SSH-trust and
Slurm roles on each node.
"""

from __future__ import annotations

import re

from rackcert.core.spec import Spec
from rackcert.core.upgrade_layers.declaration import Change, Layer, Step, StepContext
from rackcert.core.upgrade_layers.host_image import VGPU_MANAGER

GUEST_COMPONENTS = ("nvidia_driver", "cuda", "ofed", "container_toolkit", "nccl")


def guest_versions(spec: Spec, _where: str = "") -> dict[str, str]:
    """The guest components the spec pins (component -> version)."""
    out: dict[str, str] = {}
    for name in GUEST_COMPONENTS:
        value = getattr(spec.guest, name)
        if value:
            out[name] = str(value)
    return out


def uses_vgpu(spec: Spec) -> bool:
    """Any VM of the rack takes vGPUs (then the host's manager must lead the guest driver)."""
    used = {vm.template for vm in spec.vms}
    return any(t.gpu_mode.value == "vgpu" for t in spec.vm_templates if t.name in used)


def branch(version: str | None) -> int | None:
    """A driver's branch, its major number (550.127.06 -> 550; R535 -> 535)."""
    match = re.search(r"\d+", version or "")
    return int(match.group()) if match else None


def driver_branch(_before: Spec, after: Spec, changes: list[Change]) -> list[str]:
    """A guest driver newer than the hosts' vGPU manager, where VMs use vGPUs: NVIDIA
    supports a manager of the same or a newer branch than the guest driver, never the
    reverse (vGPU release notes, "Driver versions")."""
    if not uses_vgpu(after):
        return []
    touched = {c.component for c in changes}
    if not touched & {"nvidia_driver", VGPU_MANAGER}:
        return []
    guest, manager = after.guest.nvidia_driver, after.host_software.vgpu_manager_version
    if guest and not manager:
        return [
            "the rack's VMs use vGPUs and the guest driver changes, but"
            " host_software.vgpu_manager_version is not given: name the hosts' vGPU manager"
            " so the branch rule (manager same or newer than the guest) can be checked"
        ]
    g, m = branch(guest), branch(manager)
    if g is not None and m is not None and g > m:
        return [
            f"guest driver {guest} (R{g}) is of a newer branch than the hosts' vGPU manager"
            f" {manager} (R{m}); NVIDIA supports the reverse only: upgrade the manager to R{g}"
            " or newer in the same spec"
        ]
    return []


def _configure(ctx: StepContext) -> object:
    return ctx.port.apply(ctx.where, ctx.target)


GUEST = Layer(
    name="guest",
    side="guest",
    port="guest",
    fields=tuple(f"guest.{c}" for c in GUEST_COMPONENTS),
    versions=guest_versions,
    components=GUEST_COMPONENTS,
    node_state="guest",
    steps=(
        Step(
            "guest layer",
            "configure's roles for the moved components end ok on the node",
            _configure,
        ),
    ),
    refusals=(driver_branch,),
    adapter="rackcert.rollout:configure_guest",
    # site.yml's role tags (playbooks/site.yml; a test checks each is one): the roles that
    # install a component, and those built on it (nvidia_peermem is the driver's and OFED's
    # GPUDirect module; vgpu_license licenses the driver; nccl_tests is built with CUDA's
    # nvcc and NCCL; dl_runtime's frameworks carry their NCCL).
    tags={
        "nvidia_driver": ("nvidia_driver", "vgpu_license", "nvidia_peermem"),
        "cuda": ("cuda", "nccl_tests"),
        "ofed": ("ofed", "mlx_ats", "nvidia_peermem"),
        "container_toolkit": ("container_toolkit",),
        "nccl": ("dl_runtime", "nccl_tests"),
    },
)
