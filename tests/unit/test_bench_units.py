"""Bench arithmetic and planning, without launching anything: nccl-tests' definitions,
weak-scaling speedup/efficiency, verdict thresholds, launch command lines, CLI input errors."""

from __future__ import annotations

import math
import shlex
from pathlib import Path

import pytest

from rackcert.core.errors import InputError
from rackcert.core.results import (
    Status,
)
from rackcert.core.spec import Certification
from rackcert.core.spec_loader import load_spec
from rackcert.core.ssh_target import SshTarget
from tests.support.bench_units import ar as _ar
from tests.support.bench_units import sc as _sc
from validation.bench import launch, verdict
from validation.bench.node import allreduce_loop, resnet_loop, storage, worker
from validation.bench.options import BenchOptions, Engine
from validation.bench.orchestrate import choose_engine, plan_points
from validation.bench.transport import NODE_PATH, Node
from validation.bench.units import allreduce as allreduce_unit
from validation.bench.units import resnet as resnet_unit

LAB = Path(__file__).resolve().parents[2] / "inventories" / "lab.yaml"
R750 = Path(__file__).resolve().parents[2] / "inventories" / "r750xa-4node.yaml"


def test_sweep_doubles_from_8_bytes_to_1_gib() -> None:
    sizes = allreduce_loop.sweep_sizes()
    assert sizes[0] == 8 and sizes[-1] == 1 << 30 and len(sizes) == 28
    assert all(b == 2 * a for a, b in zip(sizes, sizes[1:], strict=False))
    with pytest.raises(ValueError):
        allreduce_loop.sweep_sizes(64, 8)


@pytest.mark.parametrize(("n", "factor"), [(1, 0.0), (2, 1.0), (4, 1.5), (8, 1.75), (16, 1.875)])
def test_busbw_factor_is_nccl_tests_2_n_minus_1_over_n(n: int, factor: float) -> None:
    assert allreduce_loop.busbw_factor(n) == pytest.approx(factor)
    assert allreduce_loop.busbw_gbps(10.0, n) == pytest.approx(10.0 * factor)


def test_algbw_is_bytes_over_time_in_gb_per_s() -> None:
    # 1 GiB in 10 ms: 107.37 GB/s (nccl-tests divides by 1e9, not 2**30)
    assert allreduce_loop.algbw_gbps(1 << 30, 0.010) == pytest.approx(107.3741824)
    assert allreduce_loop.algbw_gbps(8, 0.0) == 0.0


def test_expected_sum_matches_the_fill_pattern() -> None:
    n = 3
    for i in range(20):
        want = sum((r + 1) + (i % allreduce_loop.PATTERN) for r in range(n))
        assert allreduce_loop.expected_sum(i, n) == want


def test_busbw_fraction_uses_the_largest_sizes_and_bits() -> None:
    pts = [
        {"size_bytes": 1 << k, "busbw_gbps": float(k)} for k in range(10, 20)
    ]  # largest three: 17, 18, 19 GB/s -> mean 18 GB/s = 144 Gb/s
    assert allreduce_unit.busbw_fraction(pts, 100.0) == pytest.approx(1.44)
    assert allreduce_unit.busbw_fraction(pts, None) is None


def test_scaling_speedup_and_efficiency_against_n_times_baseline() -> None:
    # The seed's table: 2757 / 5392 / 10675 images/s on 1 / 2 / 4 nodes.
    rows = [
        {"nodes": 4, "gpus": 4, "images_per_sec": 10675.0},
        {"nodes": 1, "gpus": 1, "images_per_sec": 2757.0},
        {"nodes": 2, "gpus": 2, "images_per_sec": 5392.0},
    ]
    out = resnet_unit.scaling(rows)
    assert [r["gpus"] for r in out] == [1, 2, 4]
    assert out[1]["speedup"] == pytest.approx(5392 / 2757)
    assert out[2]["efficiency"] == pytest.approx(10675 / (4 * 2757))
    assert 0.96 < out[2]["efficiency"] < 0.97


def test_spread_is_1_96_sigma() -> None:
    assert resnet_loop.spread([10.0, 12.0]) == pytest.approx(1.96 * math.sqrt(2.0))
    assert resnet_loop.spread([5.0]) == 0.0


def test_naive_config_is_eager_fp32_nchw() -> None:
    cfg = resnet_loop.TrainConfig.for_device("cuda").naive()
    assert (cfg.precision, cfg.channels_last, cfg.compile, cfg.cudnn_benchmark) == (
        "fp32",
        False,
        False,
        False,
    )
    fast = resnet_loop.TrainConfig.for_device("cuda")
    assert fast.precision == "bf16" and fast.channels_last and fast.compile
    assert fast.compile_mode == "auto" and fast.compile_optimizer


def test_percentile_nearest_rank() -> None:
    values = sorted(float(i) for i in range(1, 101))
    assert storage.percentile(values, 50) == 50.0
    assert storage.percentile(values, 99) == 99.0
    assert storage.percentile(values, 100) == 100.0
    assert storage.percentile([], 50) == 0.0


def test_verdict_fails_on_each_threshold_and_says_which() -> None:
    cert = Certification(
        scaling_efficiency_min=0.9,
        allreduce_busbw_fraction_min=0.7,
        resnet50_images_per_gpu_min=2500,
    )
    good = verdict.judge(cert, _ar(4, 0.8), _sc([2757, 2696, 2669]), [], None, judge_link=True)
    assert good.passed, good.reasons
    slow = verdict.judge(cert, _ar(4, 0.5), _sc([2757, 2000]), [], None, judge_link=True)
    assert not slow.passed
    ids = {r.split(":")[0] for r in slow.reasons}
    assert ids == {
        "allreduce.busbw_fraction",
        "resnet50.scaling_efficiency",
        "resnet50.images_per_gpu",
    }
    wrong = verdict.judge(cert, _ar(2, 0.9, correct=False), None, [], None, judge_link=True)
    assert [c.id for c in wrong.checks if c.status is Status.failed] == ["allreduce.correct"]
    nan = verdict.judge(
        cert, None, None, [{"world_size": 1, "loss_finite": False}], None, judge_link=True
    )
    assert not nan.passed and nan.reasons[0].startswith("resnet50.loss_finite")


def test_verdict_skips_what_cannot_be_judged_without_passing_it() -> None:
    cert = Certification()
    v = verdict.judge(cert, _ar(1, None), _sc([100.0]), [], None, judge_link=False)
    by_id = {c.id: c for c in v.checks}
    assert by_id["allreduce.busbw_fraction"].status is Status.skipped
    assert "world size 1" in by_id["allreduce.busbw_fraction"].observed
    assert by_id["resnet50.scaling_efficiency"].status is Status.skipped
    local = verdict.judge(cert, _ar(2, 0.01), None, [], None, judge_link=False)
    assert {c.id: c for c in local.checks}["allreduce.busbw_fraction"].status is Status.skipped


def test_engine_choice() -> None:
    assert choose_engine("gloo", True) == Engine("torch", "cpu", "gloo")
    assert choose_engine("nccl", True) == Engine("torch", "cuda", "nccl")
    with pytest.raises(InputError, match="needs GPUs"):
        choose_engine("nccl", False)
    with pytest.raises(InputError, match="choose one of"):
        choose_engine("mpi", False)


def test_plan_local_and_multi_node_points() -> None:
    lab = load_spec(LAB).spec
    assert [p.gpus for p in plan_points(lab, BenchOptions(local=True), 8)] == [1, 2, 4, 8]
    assert [p.gpus for p in plan_points(lab, BenchOptions(local=True), 6)] == [1, 2, 4, 6]
    assert [p.gpus for p in plan_points(lab, BenchOptions(local=True), 0)] == [1, 2]
    with pytest.raises(InputError, match="has 1 GPU"):
        plan_points(lab, BenchOptions(local=True, gpus=[1, 2]), 1)
    r750 = load_spec(R750).spec
    pts = plan_points(r750, BenchOptions(), 0)
    assert [(p.nodes, p.gpus) for p in pts] == [(1, 1), (2, 2), (4, 4)]
    assert [v.name for v in pts[-1].vms] == ["mn-node1", "mn-node2", "mn-node3", "mn-node4"]
    with pytest.raises(InputError, match="offers 4 node"):
        plan_points(r750, BenchOptions(nodes=[8]), 0)


def test_ssh_torchrun_joins_one_c10d_rendezvous_on_the_first_node() -> None:
    nodes = [
        Node("a", SshTarget(host="10.0.0.1", port=2222, identity_file="/k", known_hosts="/kh")),
        Node("b", SshTarget(host="10.0.0.2", user="ubuntu")),
    ]
    step = launch.ssh_torchrun(
        nodes, 2, ["--quick"], remote_python="/py", remote_dir="/src", rdzv_id="rid"
    )
    cmds = launch.on_nodes("t", [step]).commands  # as SshTransport starts them
    assert len(cmds) == 2
    assert cmds[0][:2] == ["ssh", "-tt"]
    assert cmds[0][cmds[0].index("-p") + 1] == "2222" and cmds[0][cmds[0].index("-i") + 1] == "/k"
    assert "BatchMode=yes" in cmds[0] and cmds[0][-3:-1] == ["--", "root@10.0.0.1"]
    assert "UserKnownHostsFile=/kh" in cmds[0] and "StrictHostKeyChecking=yes" in cmds[0]
    assert "StrictHostKeyChecking=yes" in cmds[1]  # no file: the user's own, strictly
    assert "root@10.0.0.1" in cmds[0] and "ubuntu@10.0.0.2" in cmds[1]
    for cmd in cmds:
        remote = shlex.split(cmd[-1])
        assert remote[:3] == ["cd", "/src", "&&"]
        tail = remote[remote.index("/py") :]
        assert tail[:3] == ["/py", "-m", "torch.distributed.run"]
        assert tail[tail.index("--rdzv-backend") + 1] == "c10d"
        assert tail[tail.index("--rdzv-endpoint") + 1] == "10.0.0.1:29400"
        assert tail[tail.index("--rdzv-id") + 1] == "rid"
        assert tail[tail.index("--nnodes") + 1] == "2"
        assert "PYTHONPATH=/src" in remote and remote[remote.index("exec") + 1 :][:2] == [
            "env",
            "-i",
        ]


def test_horovodrun_runs_on_the_first_node_with_the_data_interface() -> None:
    nodes = [
        Node("a", SshTarget(host="10.0.0.1", port=2222, identity_file="/k")),
        Node("b", SshTarget(host="10.0.0.2")),
    ]
    keys = ["[10.0.0.1]:2222 ssh-ed25519 AAAAkeyA", "[10.0.0.2]:2222 ssh-ed25519 AAAAkeyB"]
    step = launch.ssh_horovodrun(
        nodes, 4, ["--quick"], remote_python="/opt/rackcert/venv/bin/python", interface="ens3f0",
        host_keys=keys,
    )  # fmt: skip
    (cmd,) = launch.on_nodes("t", [step]).commands
    assert cmd[:2] == ["ssh", "-tt"] and cmd[-3:-1] == ["--", "root@10.0.0.1"]
    remote = shlex.split(cmd[-1])
    # The wrapper's directory: shipped keys and the ssh wrapper, first on horovodrun's PATH.
    where = next(w for w in remote if w.startswith("/tmp/rackcert-hvd-"))
    assert remote[remote.index("mkdir") : remote.index("mkdir") + 3] == ["mkdir", "-m", "700"]
    assert "\n".join(keys) + "\n" in remote and f"{where}/known_hosts" in remote
    env = remote[remote.index("env") :]
    assert env[:2] == ["env", "-i"] and f"PATH={where}:{NODE_PATH}" in env
    hvd = remote[remote.index("/opt/rackcert/venv/bin/horovodrun") :]
    assert hvd[hvd.index("-np") + 1] == "8"
    assert hvd[hvd.index("-H") + 1] == "10.0.0.1:4,10.0.0.2:4"
    assert hvd[hvd.index("--network-interface") + 1] == "ens3f0"
    assert hvd[hvd.index("-p") + 1] == "2222" and "--gloo" in hvd
    assert hvd[-6:] == ["/opt/rackcert/venv/bin/python", "-m", "validation.bench.node.worker",
                        "--backend", "horovod", "--quick"]  # fmt: skip


def test_mpirun_hops_are_strict_and_ranks_get_named_variables_only(monkeypatch) -> None:
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("RACKCERT_VCENTER_PASSWORD", "never-forwarded")
    nodes = [
        Node("a", SshTarget(host="10.0.0.1")),
        Node("b", SshTarget(host="10.0.0.2")),
    ]
    step = launch.ssh_mpirun(nodes, 2, [], remote_python="/py", interface="eth1",
                             known_hosts="~/.ssh/known_hosts", rdzv_port=29500)  # fmt: skip
    (cmd,) = launch.on_nodes("t", [step]).commands
    assert cmd[:2] == ["ssh", "-tt"]
    assert cmd[-3:-1] == ["--", "root@10.0.0.1"]
    remote = shlex.split(cmd[-1])
    mpi = remote[remote.index("mpirun") :]
    assert mpi[mpi.index("-np") + 1] == "4" and mpi[mpi.index("-H") + 1] == "10.0.0.1:2,10.0.0.2:2"
    rsh = mpi[mpi.index("plm_rsh_args") + 1]
    assert "StrictHostKeyChecking=yes" in rsh and "UserKnownHostsFile=~/.ssh/known_hosts" in rsh
    # With the controller's enrolled keys, they travel with the launch and are the ones pinned.
    shipped = launch.ssh_mpirun(
        nodes, 2, [], remote_python="/py", host_keys=["10.0.0.2 ssh-ed25519 AAAAkeyB"]
    )
    (on_first,) = shipped.commands
    mpi2 = shlex.split(on_first)
    rsh2 = mpi2[mpi2.index("plm_rsh_args") + 1]
    where = next(w for w in mpi2 if w.startswith("/tmp/rackcert-mpi-"))
    assert f"UserKnownHostsFile={where}/known_hosts" in rsh2 and "StrictHostKeyChecking=yes" in rsh2
    assert "10.0.0.2 ssh-ed25519 AAAAkeyB\n" in mpi2
    assert mpi[mpi.index("btl_tcp_if_include") + 1] == "eth1"
    exported = [mpi[i + 1] for i, a in enumerate(mpi) if a == "-x"]
    assert "NCCL_DEBUG=INFO" in exported and "MASTER_ADDR=10.0.0.1" in exported
    assert "MASTER_PORT=29500" in exported
    assert "never-forwarded" not in cmd[-1]
    assert mpi[-4:] == ["-m", "validation.bench.node.worker", "--backend", "torch"]


def test_ssh_destination_follows_a_double_dash() -> None:
    argv = Node("n", SshTarget(host="-oProxyCommand=x")).ssh_argv()
    assert argv[-2:] == ["--", "root@-oProxyCommand=x"]


def test_node_launcher_and_record_follow_the_engine() -> None:
    from validation.bench.options import Engine
    from validation.bench.orchestrate import launch_record, launcher_of
    from validation.bench.targets import remote_python

    hvd, torch_ = Engine("horovod", "auto", "horovod"), Engine("torch", "auto", "nccl")
    assert launcher_of(BenchOptions(), hvd) == "horovodrun"
    assert launcher_of(BenchOptions(), torch_) == "torchrun"
    assert launcher_of(BenchOptions(launcher="mpirun"), torch_) == "mpirun"
    with pytest.raises(InputError, match="use --backend horovod"):
        launcher_of(BenchOptions(launcher="horovodrun"), torch_)
    lab = load_spec(LAB).spec
    vms = tuple(lab.vms)
    assert launch_record(BenchOptions(), hvd, vms)["launched_from"] == "lab-node1"
    assert launch_record(BenchOptions(), torch_, vms)["controller"] == "c10d"
    assert launch_record(BenchOptions(local=True), hvd, ())["launcher"] == "horovodrun"
    assert remote_python(lab, BenchOptions()) == "/opt/rackcert/venv/bin/python"
    assert remote_python(lab, BenchOptions(remote_python="/usr/bin/python3")) == "/usr/bin/python3"


def test_result_line_is_found_behind_an_engine_prefix() -> None:
    text = 'noise\n[1,0]<stdout>:RACKCERT_RESULT {"a": 1}\nmore\n'
    assert launch.parse_result(text) == {"a": 1}
    assert launch.parse_result("nothing") is None
    assert launch.MARKER == worker.MARKER == storage.MARKER


def test_cli_rejects_bad_options_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from rackcert.cli import main

    assert main(["bench", str(LAB), "--local", "--gpus", "1,x"]) == 2
    assert main(["bench", str(LAB), "--local", "--skip", "gpu"]) == 2
    assert main(["bench", str(LAB), "--gpus", "2"]) == 2
    assert main(["bench", str(LAB), "--launcher", "pdsh"]) == 2
    assert main(["bench", str(LAB), "--storage-engine", "dd"]) == 2
    err = capsys.readouterr().err
    assert "--launcher 'pdsh'" in err and "--storage-engine 'dd'" in err
    assert "--gpus '1,x'" in err and "--skip 'gpu'" in err and "use it with --local" in err
    assert "Traceback" not in err


def test_horovodrun_names_the_data_interface_only_across_nodes() -> None:
    """Before: the 1-node point of `rackcert demo` passed --network-interface eth0 and
    horovodrun failed ("No interface is found for address 127.0.0.1"): with only local
    hosts Horovod looks for loopback among the interfaces named."""
    from validation.bench.options import Point
    from validation.bench.orchestrate import build_launch

    lab = load_spec(LAB).spec
    hvd = Engine("horovod", "auto", "horovod")
    opts = BenchOptions(quick=True)
    for count, named in ((1, False), (2, True)):
        point = Point(count, count, 1, tuple(lab.vms[:count]))
        (cmd,) = build_launch(lab, opts, hvd, point, ["resnet"]).commands
        remote = shlex.split(cmd[-1])
        assert ("--network-interface" in remote) is named, remote
        if named:
            assert remote[remote.index("--network-interface") + 1] == lab.network.interface


def test_local_ranks_get_this_machines_toolchain_and_no_secret(monkeypatch) -> None:
    """The variables torch.compile's cache key depends on reach a local launch's ranks as
    they reach a worker started from the shell (an H200's CUDA image sets CUDA_HOME and
    CUDAHOSTCXX); secrets still do not."""
    for key, value in {
        "CUDA_HOME": "/usr/local/cuda",
        "CUDAHOSTCXX": "/opt/gcc/bin/g++",
        "TRITON_PTXAS_PATH": "/usr/local/cuda/bin/ptxas",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64",
        "RACKCERT_VCENTER_PASSWORD": "never-forwarded",
        "AWS_SECRET_ACCESS_KEY": "never-forwarded",
    }.items():
        monkeypatch.setenv(key, value)
    env = launch.child_env({"PYTHONPATH": "/repo"})
    assert env["CUDA_HOME"] == "/usr/local/cuda" and env["CUDAHOSTCXX"] == "/opt/gcc/bin/g++"
    assert env["TRITON_PTXAS_PATH"].endswith("ptxas")
    assert env["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64" and env["PYTHONPATH"] == "/repo"
    assert "never-forwarded" not in env.values()
    # Not sent to other nodes: a remote rank's toolchain is its node's own.
    step = launch.ssh_torchrun(
        [Node("a", SshTarget(host="10.0.0.1"))], 1, [], remote_python="/py", remote_dir=None
    )
    assert "CUDA_HOME" not in step.commands[0] and "never-forwarded" not in step.commands[0]
