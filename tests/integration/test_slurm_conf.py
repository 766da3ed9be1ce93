"""rackcert under Slurm, the parts that need no running Slurm: the spec's slurm block, the
slurm.conf lines, the srun command line, the placement read from the tasks' lines, the
health check's reason and state parsing. The real-Slurm tests are
tests/integration/test_slurm_lab.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rackcert.core.paths import REPO_ROOT
from rackcert.core.slurm.client import client_env
from rackcert.core.slurm.conf import health_check_lines, site_lines
from rackcert.core.spec_loader import load_spec
from tests.support.slurm_conf import LAB, SLURM
from tests.support.slurm_conf import slurm_spec as _spec
from validation.bench import slurm_launch
from validation.healthcheck import append_record


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


def test_report_includes_the_health_check_records(tmp_path: Path) -> None:

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
