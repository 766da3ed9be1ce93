"""The host image layer: ESXi's base version (hosts[].esxi_version), the vGPU manager
(host_software.vgpu_manager_version) and the other image components (host_software
.components, e.g. nmlx5), applied through vSphere's host-image client (vLCM, or esxcli
software) in a maintenance window carrying rackcert's mark, proven by a later bootTime.
"""

from __future__ import annotations

from rackcert.core.spec import Spec
from rackcert.core.upgrade_layers.declaration import Layer, Step, StepContext

ESXI = "esxi"
VGPU_MANAGER = "vgpu_manager"


def host_versions(spec: Spec, host: str) -> dict[str, str]:
    """The host image the spec asks of one host: esxi, the vGPU manager, components."""
    out = {ESXI: spec.host(host).esxi_version}
    if spec.host_software.vgpu_manager_version:
        out[VGPU_MANAGER] = spec.host_software.vgpu_manager_version
    out.update(spec.host_software.components)
    return out


def _enter(ctx: StepContext) -> object:
    return ctx.hypervisor.enter_maintenance(ctx.where, ctx.run)


def _exit(ctx: StepContext) -> object:
    return ctx.hypervisor.exit_maintenance(ctx.where)


IMAGE = Step(
    "host image",
    "the host-image client reads the target versions back",
    lambda ctx: ctx.apply(),
    state="image",
)

HOST_IMAGE = Layer(
    name="host",
    side="host",
    port="host_image",
    fields=(
        "hosts[].esxi_version",
        "host_software.vgpu_manager_version",
        "host_software.components",
    ),
    versions=host_versions,
    node_state="host",
    no_port=(
        "the host image changes, but no host-image client is wired (vLCM or esxcli);"
        " roll the guest layer alone, or use a rackcert with the host-image client"
    ),
    # Taken before the image: vLCM's remediation reboots the host itself, and then the
    # reboot step has nothing left to do but prove it.
    prepare=lambda ctx: ctx.remember_boot_time(IMAGE.name),
    steps=(
        Step(
            "host maintenance",
            "vCenter shows the host in maintenance mode with rackcert's mark",
            _enter,
            state="maintenance",
        ),
        IMAGE,
        Step("reboot", "a later bootTime", lambda ctx: ctx.reboot(), state="rebooting"),
        Step("exit maintenance", "vCenter shows the host out of maintenance mode", _exit),
    ),
    done_state="exited",
    window_states=("maintenance", "image", "rebooting"),
    window="maintenance",
    close=_exit,
    read_back=True,
    adapter="rackcert.rollout:host_image_port",
    matrix_names={ESXI: "esxi_version", VGPU_MANAGER: "vgpu_manager"},
)
