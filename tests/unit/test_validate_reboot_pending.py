"""node.reboot_pending: a node that runs another NVIDIA driver or OFED than it has installed,
or that a rackcert role left a reboot pending on, fails and names both versions."""

from __future__ import annotations

from rackcert.core.results import Status
from validation.checks import REGISTRY, NodeView, load_all, run_check
from validation.expect import NodeExpect
from validation.facts.system import RunningVersions
from validation.probes import ProbeOutput

# /proc/driver/nvidia/version's first line as NVIDIA's driver prints it.
LOADED_535 = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.161.08  Tue Mar  5 22:23:56 UTC 2024"
)


def _judge(text: str):
    load_all()
    view = NodeView(
        NodeExpect(node="n1", address="127.0.0.1"),
        {"running_versions": ProbeOutput("running_versions", 0, text)},
    )
    return run_check(REGISTRY["node.reboot_pending"], view)


def _out(nvidia_loaded="", nvidia_installed="", mlx5_loaded="", mlx5_installed="", reboot=""):
    parts = {
        "nvidia_loaded": nvidia_loaded,
        "nvidia_installed": nvidia_installed,
        "mlx5_loaded": mlx5_loaded,
        "mlx5_installed": mlx5_installed,
        "reboot": reboot,
    }
    return "".join(f"## {k}\n{v}\n" if v else f"## {k}\n" for k, v in parts.items())


def test_driver_installed_but_not_loaded_fails_naming_both():
    res = _judge(_out(LOADED_535, "550.54.15", "24.10-1.1.4", "24.10-1.1.4"))
    assert res.status is Status.failed
    assert res.observed == "NVIDIA driver loaded 535.161.08, installed 550.54.15"


def test_ofed_and_a_pending_reason_fail_together():
    reason = "nvidia_driver: the loaded module is 535.161.08, the installed driver 550.54.15"
    res = _judge(_out(LOADED_535, "535.161.08", "5.8-1.0.1", "24.10-1.1.4", reason))
    assert res.status is Status.failed
    assert "OFED mlx5_core loaded 5.8-1.0.1, installed 24.10-1.1.4" in res.observed
    assert f"pending: {reason}" in res.observed


def test_loaded_equals_installed_passes_and_the_command_reads_the_kernel():
    res = _judge(_out(LOADED_535, "535.161.08", "24.10-1.1.4", "24.10-1.1.4"))
    assert res.status is Status.passed, res
    assert res.observed == "NVIDIA driver 535.161.08, mlx5_core 24.10-1.1.4"
    assert _judge(_out()).observed == "no NVIDIA or OFED module loaded"
    cmd = RunningVersions().command()
    assert "/proc/driver/nvidia/version" in cmd and "modinfo -F version nvidia" in cmd
