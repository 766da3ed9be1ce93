"""rackcert under Slurm, the parts that need no running Slurm: the spec's slurm block, the
slurm.conf lines, the srun command line, the placement read from the tasks' lines, the
health check's reason and state parsing. The real-Slurm tests are tests/test_slurm_lab.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rackcert.core.ansible_vars import spec_group_vars
from rackcert.core.paths import REPO_ROOT
from rackcert.core.results import CheckResult, Severity, Status
from rackcert.core.slurm.client import client_env, node_reason
from rackcert.core.slurm.conf import health_check_lines, site_lines
from rackcert.core.spec_loader import load_spec
from validation.bench import slurm_launch
from validation.healthcheck import _last_own_drain, append_record, reason_for

LAB = REPO_ROOT / "inventories" / "lab.yaml"
SLURM = {
    "controller": {"address": "10.77.0.1"},
    "cluster": "lab",
    "partition": "gpu",
    "munge_key_file": "/etc/rackcert/munge.key",
}


def _spec(tmp_path: Path, slurm: dict | None = SLURM, text: str | None = None) -> Path:
    data = yaml.safe_load(LAB.read_text())
    if slurm is not None:
        data["slurm"] = slurm
    path = tmp_path / "spec.yaml"
    path.write_text(text or yaml.safe_dump(data, sort_keys=False))
    return path


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rackcert.cli", *args],
        capture_output=True, text=True, timeout=120, cwd=REPO_ROOT, check=False,
    )  # fmt: skip


def test_conf_lines_carry_cpus_memory_and_gres_from_the_template(tmp_path: Path) -> None:
    lines = site_lines(load_spec(_spec(tmp_path)).spec)
    assert lines == [
        "GresTypes=gpu",
        "NodeName=lab-node1 NodeAddr=10.77.0.11 CPUs=8 RealMemory=15564 Gres=gpu:a100:2"
        " State=UNKNOWN",
        "NodeName=lab-node2 NodeAddr=10.77.0.12 CPUs=8 RealMemory=15564 Gres=gpu:a100:2"
        " State=UNKNOWN",
        "PartitionName=gpu Nodes=lab-node1,lab-node2 MaxTime=INFINITE State=UP",
    ]
    proc = _cli("slurm", "conf", str(_spec(tmp_path)))
    assert proc.returncode == 0 and proc.stdout.splitlines() == lines, proc.stderr


def test_no_slurm_block_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = _cli("slurm", "conf", str(_spec(tmp_path, slurm=None)))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "error: spec lab: no slurm block (controller, cluster, ...)"
    ]


def test_munge_key_is_a_reference_never_inline(tmp_path: Path) -> None:
    inline = {**SLURM, "munge_key_file": "c2VjcmV0LWtleS1ieXRlcw=="}
    proc = _cli("spec", "check", str(_spec(tmp_path, slurm=inline)))
    assert proc.returncode == 2 and "munge_key_file" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_role_variables_come_from_the_block(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path)).spec
    got = spec_group_vars(spec)
    assert got["slurm_node_enabled"] is True
    assert got["slurm_node_munge_key_file"] == "/etc/rackcert/munge.key"
    assert got["slurm_node_conf_file"] == ""  # configless
    assert got["slurm_node_gres_type"] == "a100"
    assert spec_group_vars(load_spec(LAB).spec)["slurm_node_enabled"] is False


def test_health_check_conf_prints_a_wrapper_and_the_lines(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    proc = _cli("slurm", "health-check-conf", str(spec), "--spec-on-node", "/etc/rackcert/r.yaml")
    assert proc.returncode == 0, proc.stderr
    assert "#   exec /opt/rackcert/venv/bin/rackcert -q validate /etc/rackcert/r.yaml" \
        " --health-check" in proc.stdout  # fmt: skip
    lines = [ln for ln in proc.stdout.splitlines() if not ln.startswith("#")]
    assert lines == health_check_lines("/etc/slurm/rackcert-health-check")
    bad = _cli("slurm", "health-check-conf", str(spec), "--spec-on-node", "rel/path.yaml")
    assert bad.returncode == 2 and "--spec-on-node" in bad.stderr


def test_srun_command_line_and_placement(monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")  # this machine's: never the tasks'
    launch = slurm_launch.build(
        "2 node(s)", nodes=2, tasks_per_node=4, gpus=True, python="/opt/rackcert/venv/bin/python",
        worker_args=["--tasks", "allreduce"], partition="gpu", reservation="maint",
        immediate_s=60, client_conf="/etc/slurm/site.conf",
    )  # fmt: skip
    (cmd,) = launch.commands
    head = cmd[: cmd.index("/bin/sh")]
    assert head[:2] == ["srun", "--mpi=pmix"]
    for opt in (
        "--nodes=2",
        "--ntasks-per-node=4",
        "--gpus-per-task=1",
        "--exclusive",
        "--immediate=60",
        "--partition=gpu",
        "--reservation=maint",
        "--export=NONE",
    ):
        assert opt in head, opt  # fmt: skip
    # srun's environment is a Slurm client's, the launch adds nothing of its own to it
    (proc,) = launch.transport.processes(launch.steps)
    assert launch.env == {} and proc.env == client_env("/etc/slurm/site.conf")
    script = cmd[-1]
    assert "CUDA_VISIBLE_DEVICES=7" not in script
    # Each task keeps the GPU Slurm bound to it.
    shown = subprocess.run(
        ["sh", "-c", 'set -- ${CUDA_VISIBLE_DEVICES+"CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"};'
         ' echo "$#:$1"'], env={"CUDA_VISIBLE_DEVICES": "2,3"}, capture_output=True, text=True,
    )  # fmt: skip
    assert shown.stdout == "1:CUDA_VISIBLE_DEVICES=2,3\n"
    assert ' ${CUDA_VISIBLE_DEVICES+"CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"} ' in script
    text = (
        "rackcert-slurm job=41 node=n2 rank=1\nnoise\nrackcert-slurm job=41 node=n1 rank=0\n"
        "0: rackcert-slurm job=41 node=n1 rank=2\n"
    )
    assert slurm_launch.placement(text) == {"job_ids": [41], "nodes": ["n1", "n2"], "ranks": 3}


def test_srun_horovod_is_an_mpi_direct_launch() -> None:
    """Horovod under srun as DeepOps runs it: --mpi=pmix starts every rank, the ranks keep
    the step's PMIx variables (no `env -i`), MPI controller and operations, Open MPI allowed
    to run as root and kept on the data interface."""
    launch = slurm_launch.build(
        "2 node(s)", nodes=2, tasks_per_node=1, gpus=False, python="/opt/rackcert/venv/bin/python",
        worker_args=["--tasks", "allreduce"], partition="lab", reservation=None, immediate_s=5,
        client_conf=None, backend="horovod", interface="eth0",
    )  # fmt: skip
    (cmd,) = launch.commands
    assert cmd[:2] == ["srun", "--mpi=pmix"]
    script = cmd[-1]
    assert "exec env -i " not in script and "exec env HOME=" in script
    for pair in (
        "HOROVOD_CONTROLLER=mpi",
        "HOROVOD_CPU_OPERATIONS=mpi",
        "OMPI_ALLOW_RUN_AS_ROOT=1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
        "OMPI_MCA_btl_tcp_if_include=eth0",
    ):
        assert f" {pair} " in script, pair  # fmt: skip
    assert "-m validation.bench.node.worker --backend horovod --tasks allreduce" in script
    torch = slurm_launch.build(
        "2 node(s)", nodes=2, tasks_per_node=1, gpus=False, python="/p/python",
        worker_args=[], partition="lab", reservation=None, immediate_s=5, client_conf=None,
    )  # fmt: skip
    assert "exec env -i " in torch.commands[0][-1] and "HOROVOD_" not in torch.commands[0][-1]


def _failed(check: str, observed: str) -> CheckResult:
    return CheckResult(
        id=check, node="n1", severity=Severity.error, status=Status.failed,
        observed=observed, expected="x", reason="r",
    )  # fmt: skip


def test_drain_reason_and_own_drain_record(tmp_path: Path) -> None:
    reason = reason_for([_failed("gpu.count", "1 GPU(s):\n A100"), _failed("gpu.xid", "79")])
    assert reason == "rackcert: gpu.count: 1 GPU(s): A100 (+1 more)"
    line = f"NodeName=n1 State=IDLE+DRAIN Reason={reason} [root@2026-12-03T15:00:00] Comment=x"
    assert node_reason(line) == reason
    odd = "rackcert: gpu.pcie.link: gen=3 width=8 ['x']"
    assert node_reason(f"NodeName=n1 Reason={odd} [slurm@2026-12-03T15:00:00]\n") == odd
    record = tmp_path / "h.jsonl"
    assert _last_own_drain(record, "n1") is None
    append_record(record, {"node": "n1", "action": "drain", "reason": reason})
    append_record(record, {"node": "n2", "action": "drain", "reason": "rackcert: other"})
    assert _last_own_drain(record, "n1") == reason
    append_record(record, {"node": "n1", "action": "resume", "reason": reason})
    assert _last_own_drain(record, "n1") is None


def test_report_includes_the_health_check_records(tmp_path: Path) -> None:
    import json

    from rackcert.core.runs import RunDir

    loaded = load_spec(_spec(tmp_path))
    run = RunDir.create(tmp_path / "runs", "lab", loaded.sha256, loaded.text)
    record = tmp_path / "node1-health.jsonl"
    append_record(record, {"time": "2026-12-03T15:00:00Z", "node": "lab-node1",
                           "action": "drain", "reason": "rackcert: gpu.count: 1",
                           "failing": ["gpu.count"], "seconds": 1.2})  # fmt: skip
    record.write_text(record.read_text() + "not json\n")
    append_record(record, {"time": "2026-12-03T15:05:00Z", "node": "lab-node1",
                           "action": "resume", "reason": "rackcert: gpu.count: 1"})  # fmt: skip
    missing = _cli("report", "build", str(run.path), "--health-record", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "--health-record" in missing.stderr, missing.stderr
    proc = _cli("report", "build", str(run.path), "--format", "json,html",
                "--health-record", str(record))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    events = json.loads((run.path / "run.json").read_text())["health_checks"]
    assert [(e["node"], e["action"]) for e in events] == [
        ("lab-node1", "drain"), ("lab-node1", "resume")
    ]  # fmt: skip
    html = (run.path / "report.html").read_text()
    assert "Slurm health check" in html and "rackcert: gpu.count: 1" in html
    manifest = (run.path / "MANIFEST.sha256").read_text()
    assert "artifacts/health/" in manifest


def test_bench_srun_refusals_are_one_line(tmp_path: Path) -> None:
    runs = str(tmp_path / "runs")
    no_block = _cli("bench", str(LAB), "--launcher", "srun", "--nodes", "2", "--runs-dir", runs)
    assert no_block.returncode == 2 and no_block.stderr.strip().splitlines() == [
        "error: --launcher srun: the spec has no slurm block (controller, partition)"
    ], no_block.stderr
    stray = _cli("bench", str(LAB), "--reservation", "maint", "--runs-dir", runs)
    assert stray.returncode == 2 and "use it with --launcher srun" in stray.stderr


def test_a_result_line_srun_cut_into_labelled_pieces_is_joined_back() -> None:
    """srun --label forwards a long line in 1024-byte pieces, each on its own labelled line
    (seen with Slurm 22.05.8); other tasks' lines may come between them."""
    from validation.bench.launch import MARKER, parse_result

    result = {
        "world_size": 2,
        "points": [{"size_bytes": 2**i, "busbw": 0.1 * i} for i in range(90)],
    }
    line = MARKER + json.dumps(result)
    assert len(line) > 3000
    pieces = [line[i : i + 1024] for i in range(0, len(line), 1024)]
    text = "".join(f"0: {p}\n" for p in pieces) + "0: RACKCERT_DONE 0\n"
    assert parse_result(text) == result
    between = (
        "0: " + pieces[0] + "\n1: RACKCERT_DONE 1\n" + "".join(f"0: {p}\n" for p in pieces[1:])
    )
    assert parse_result(between) == result
    cut = "0: " + pieces[0] + "\nsrun: error: node2: task 1: Killed\n"
    with pytest.raises(ValueError):  # a result that never came whole is no figure
        parse_result(cut)
