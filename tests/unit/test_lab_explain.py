"""The demo's summary explains every failing check: the lab's missing hardware, its shared CPU,
or a finding shown with what was seen."""

from __future__ import annotations

from rackcert.core.results import CheckResult, Status
from rackcert.lab.explain import BenchFailure, explain, lab_limited


def _r(id_: str, reason: str = "", observed: str = "", status: Status = Status.failed):
    return CheckResult(id=id_, node="lab-node1", status=status, reason=reason, observed=observed)


def test_absent_tools_and_the_gpu_only_toolkit_are_the_labs_missing_hardware():
    assert lab_limited(_r("gpu.count", "nvidia-smi not found"))
    assert lab_limited(_r("gpu.cuda.toolkit", "no CUDA toolkit found (/usr/local/cuda, nvcc)"))
    assert lab_limited(_r("gpu.cuda.toolkit", "exit status 127: sh: 1: nvcc: not found"))
    # A toolkit that is there but of another version is a finding, not the lab's hardware.
    assert not lab_limited(_r("gpu.cuda.toolkit", "CUDA toolkit version differs", "13.0.88"))
    assert not lab_limited(_r("gpu.count", "nvidia-smi not found", status=Status.passed))


def test_every_failing_check_lands_in_one_line():
    validate = [
        _r("gpu.count", "nvidia-smi not found"),
        _r("ofed.version", "ofed_info not found"),
        _r("time.sync", "clock not synchronised", "Leap status : Not synchronised"),
        _r("ssh.peers", status=Status.passed),
    ]
    bench = [
        BenchFailure("resnet50.scaling_efficiency", "0.414 at 4 GPUs (2 node(s))"),
        BenchFailure("allreduce.busbw_fraction", "0.31 of 2 Gb/s over nic (2 nodes)"),
    ]
    got = explain(validate, bench, cores=2)
    assert got.failing == 3
    assert [r.id for r in got.hardware] == ["gpu.count", "ofed.version"]
    assert [b.id for b in got.shared_cpu] == ["resnet50.scaling_efficiency"]
    assert len(got.findings) == 2
    lines = got.lines(cores=2)
    assert "2 of the 3 failing check(s) fail for that reason alone" in lines[0]
    assert "share this machine's 2 CPU core(s)" in lines[1]
    assert "lab-node1 time.sync: Leap status : Not synchronised" in lines[2]
    assert "bench allreduce.busbw_fraction: 0.31 of 2 Gb/s" in lines[3]


def test_scaling_within_the_cores_is_a_finding_not_the_shared_cpu():
    """With a core per rank the lab's CPU does not excuse a poor efficiency."""
    got = explain(
        [], [BenchFailure("resnet50.scaling_efficiency", "0.4 at 4 GPUs (2 node(s))")], cores=8
    )
    assert not got.shared_cpu and got.findings == [
        "bench resnet50.scaling_efficiency: 0.4 at 4 GPUs (2 node(s))"
    ]
