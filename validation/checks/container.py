"""Container checks: the NVIDIA Container Toolkit and the runtime's view of the GPUs."""

from __future__ import annotations

from validation.checks import NodeView, Outcome, check, failed, passed, skipped
from validation.facts.container import CdiGpus, ContainerdNvidia, CtkVersion, DockerRuntimes


def _needs_runtime(view: NodeView) -> Outcome | None:
    if view.expect.container_runtime == "none":
        return skipped("guest.container_runtime is none in the spec")
    return None


@check("container.toolkit", facts=(CtkVersion,))
def toolkit(view: NodeView) -> Outcome:
    """nvidia-ctk reports the Container Toolkit version the spec pins (guest.container_toolkit).

    Fix: install nvidia-container-toolkit of that version (role container_toolkit).
    """
    if (skip := _needs_runtime(view)) is not None:
        return skip
    want = view.expect.container_toolkit
    seen = view.fact(CtkVersion) or "?"
    if want and seen != want:
        return failed(seen, want, "Container Toolkit version differs from the spec")
    return passed(seen, want or "any")


@check("container.runtime", facts=(DockerRuntimes, ContainerdNvidia))
def runtime(view: NodeView) -> Outcome:
    """The spec's container runtime (docker or containerd) has the nvidia runtime configured.

    Fix: nvidia-ctk runtime configure --runtime=<docker|containerd>, then restart the runtime.
    """
    if (skip := _needs_runtime(view)) is not None:
        return skip
    kind = view.expect.container_runtime
    if kind == "docker":
        found = view.fact(DockerRuntimes)
        if found is None:
            out = view.output(DockerRuntimes)
            seen = out.text.strip()[:120] if out else ""
            return failed(seen, "nvidia runtime", "docker info gave no runtimes")
        names = found
    else:
        names = ["nvidia"] if view.fact(ContainerdNvidia) else []
    if "nvidia" not in names:
        return failed(", ".join(names) or "none", "nvidia", f"{kind} has no nvidia runtime")
    return passed(f"{kind} runtimes: {', '.join(names)}", "nvidia")


@check("container.gpus", facts=(CdiGpus,))
def gpus(view: NodeView) -> Outcome:
    """The container toolkit's CDI spec lists every GPU of the VM (`nvidia-ctk cdi list`).

    Fix: nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml after each driver change.
    """
    if (skip := _needs_runtime(view)) is not None:
        return skip
    seen = view.fact(CdiGpus)
    want = view.expect.gpus
    if len(seen) != want:
        return failed(f"{len(seen)} CDI GPU(s)", f"{want}", "containers would not see every GPU")
    return passed(f"{len(seen)} CDI GPU(s)", f"{want}")
