"""What more than one test module needs from the old test_validate_checks.py:
tests/unit/test_gpu_nic_path.py, tests/unit/test_validate_checks.py.
"""

from __future__ import annotations

from tests.support.paths import FIXTURES
from validation.checks import REGISTRY, NodeView, load_all, run_check
from validation.expect import NodeExpect
from validation.probes import ProbeOutput

H200 = FIXTURES / "h200"
# fact key (validation.facts) -> captured H200 output
FILES = {
    "gpus": "nvidia-smi-query-gpu",
    "nvidia_smi": "nvidia-smi-q",
    "gpu_topology": "nvidia-smi-topo-m",
    "nvlink": "nvidia-smi-nvlink-s",
    "xid_events": "dmesg-xid",
    "kernel_modules": "proc-modules",
    "cuda_toolkit": "nvcc",
    "mounts": "mountinfo",
}


def h200_outputs() -> dict[str, ProbeOutput]:
    out = {p: ProbeOutput(p, 0, (H200 / f"{f}.txt").read_text()) for p, f in FILES.items()}
    uname = (H200 / "uname.txt").read_text().split()
    out["hostname"] = ProbeOutput("hostname", 0, uname[1])
    out["kernel"] = ProbeOutput("kernel", 0, uname[2])
    # pyinfra's LinuxDistribution command prints each /etc/*-release file, then ---.
    release = (H200 / "os-release.txt").read_text()
    out["os"] = ProbeOutput("os", 0, f"/etc/os-release\n{release}\n---")
    out["ofed"] = ProbeOutput("ofed", 127, "", missing="ofed_info")
    out["rdma_ports"] = ProbeOutput("rdma_ports", 127, "", missing="ibdev2netdev")
    out["nic_ats"] = ProbeOutput("nic_ats", 127, "", missing="mlxconfig")
    out["rdma_rates"] = ProbeOutput("rdma_rates", 0, "")
    return out


def h200_expect(**kw) -> NodeExpect:
    base = dict(
        node="h200",
        address="127.0.0.1",
        gpus=1,
        gpu_models=["NVIDIA H200"],
        driver="580.159.04",
        cuda="13.0",
        os="ubuntu-24.04",
        mtu=1400,
    )
    base.update(kw)
    return NodeExpect(**base)


def judge(check_id: str, expect: NodeExpect, outputs=None):
    load_all()
    return run_check(REGISTRY[check_id], NodeView(expect, outputs or h200_outputs()))
