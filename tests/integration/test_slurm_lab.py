"""rackcert under a real Slurm (Debian's slurmctld, slurmd and munge 22.05/0.5.15): two SSH
test hosts joined by the slurm_node role, the bench as a Slurm job, the health check's
drains and resumes as `sinfo -R` shows them. Needs root and .ci/setup's Slurm packages;
the fixture is tests/support/plugins/slurm.py (one controller per test process, shared by every
Slurm module; node1 and node2 are its default partition, node3 and node4 idle beside them)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import yaml

from rackcert.configure.runner import configure
from rackcert.core.paths import REPO_ROOT
from tests.support.plugins.slurm import SlurmRack, only_on

PYTHON = sys.executable


def bench(rack: SlurmRack, run_path: Path, *args: str, timeout: float = 400):
    return subprocess.run(
        [PYTHON, "-m", "rackcert.cli", "bench", str(rack.loaded.path), "--launcher", "srun",
         "--backend", "gloo", "--nodes", "2", "--gpus-per-node", "1", "--quick",
         "--max-bytes", "1048576", "--skip", "resnet,storage", "--remote-python", PYTHON,
         "--remote-dir", str(REPO_ROOT), "--run", str(run_path), "--json", *args],
        capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )  # fmt: skip


def reasons(rack: SlurmRack) -> dict[str, str]:
    """`sinfo -R`: the drained nodes and their reasons."""
    out = rack.lab.client("sinfo", "-R", "-h", "-N", "-o", "%N|%E").stdout
    return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)


def test_role_joins_the_nodes_and_a_second_run_changes_nothing(slurm_rack: SlurmRack) -> None:
    rack = slurm_rack
    assert rack.first_join.data.totals.changed > 0
    # the one join joined all four of the session rack's nodes (two of them this module's)
    assert rack.lab.node_states() == dict.fromkeys(["node1", "node2", "node3", "node4"], "idle")
    key = rack.lab.munge_key.read_bytes()
    for host in rack.hosts:
        on_node = host.path("/etc/munge/munge.key")
        assert on_node.read_bytes() == key
        assert stat.S_IMODE(on_node.stat().st_mode) == 0o400
        assert host.path("/etc/slurm/slurm.conf").read_text() == rack.lab.conf.read_text()
        gres = host.path("/etc/slurm/gres.conf").read_text()
        assert "AutoDetect=off" in gres and "No GPU on this node" in gres, gres
    run = rack.run("second-join")
    again = configure(rack.loaded, run, tags=["slurm"])
    assert again.status == "ok", again.error
    assert again.data.totals.changed == 0, [h.changed_tasks for h in again.data.hosts.values()]
    # The key is copied by reference, never logged: not in any artifact of either run.
    for path in [*run.path.rglob("*"), *rack.directory.joinpath("runs").rglob("*")]:
        if path.is_file():
            assert key not in path.read_bytes(), path


def test_srun_bench_two_nodes_gloo_inside_a_reservation(slurm_rack: SlurmRack) -> None:
    rack = slurm_rack
    made = rack.lab.scontrol(
        "create", "reservation", "ReservationName=rackcert-maint", "Nodes=node1,node2",
        "StartTime=now", "Duration=30", "Users=root", "Flags=maint,ignore_jobs",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    try:
        run = rack.run("bench")
        proc = bench(rack, run.path, "--reservation", "rackcert-maint", "--timeout", "300")
        data = json.loads(proc.stdout or "{}")
        jobs = (data.get("launch") or {}).get("jobs") or [{"job_ids": [0]}]
        job = rack.lab.scontrol("show", "job", str(jobs[0]["job_ids"][0]), "-o").stdout
    finally:
        rack.lab.scontrol("delete", "ReservationName=rackcert-maint")
    # INCOMPLETE (exit 1): no ResNet50 measured, so not every required check is judged.
    assert proc.returncode == 1 and proc.stdout.strip(), proc.stderr[-3000:]
    assert data["mode"] == "slurm"
    launch_info = data["launch"]
    assert launch_info["launcher"] == "srun" and launch_info["controller"] == "slurm"
    (placed,) = launch_info["jobs"]
    (job_id,) = placed["job_ids"]
    assert sorted(placed["nodes"]) == ["node1", "node2"] and placed["ranks"] == 2
    (launch,) = data["launches"]
    assert launch["slurm"] == placed
    (cmd,) = launch["commands"]
    assert cmd[0] == "srun" and "--mpi=pmix" in cmd and "--nodes=2" in cmd
    assert "--reservation=rackcert-maint" in cmd and "--exclusive" in cmd
    assert f"JobId={job_id} " in job
    assert "JobName=rackcert-bench" in job and "Reservation=rackcert-maint" in job, job
    assert "NodeList=node[1-2]" in job and "JobState=COMPLETED" in job, job
    ar = data["allreduce"]
    assert ar["backend"] == "gloo" and ar["world_size"] == 2
    assert ar["points"] and all(p["correct"] for p in ar["points"])
    assert {r["host"] for r in launch["ranks"]} == {"node1", "node2"}


def test_a_job_slurm_cannot_place_is_one_line_within_its_timeout(slurm_rack: SlurmRack) -> None:
    rack = slurm_rack
    drained = rack.lab.scontrol("update", "nodename=node2", "state=drain", "reason=operator: test")
    assert drained.returncode == 0, drained.stderr
    try:
        run = rack.run("unplaceable")
        start = time.monotonic()
        proc = bench(rack, run.path, timeout=120)
        took = time.monotonic() - start
        wrong = bench(rack, run.path, "--reservation", "no-such-reservation", timeout=120)
    finally:
        rack.lab.scontrol("update", "nodename=node2", "state=resume")
    # Two nodes asked, one idle: srun gives up after the spec's job_timeout_s (5 s here).
    assert proc.returncode != 0 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "srun: error: Unable to allocate resources" in lines[0], lines[0]
    assert took < 5 + 60, took  # the 5 s bound plus start-up on a loaded 2-core machine
    assert wrong.returncode != 0 and len(wrong.stderr.strip().splitlines()) == 1, wrong.stderr
    assert "reservation" in wrong.stderr.lower(), wrong.stderr
    # What was recorded before the failure is kept: bench.json says failed, with the line.
    record = json.loads((run.path / "bench.json").read_text())
    assert record["status"] == "failed" and "Unable to allocate" in record["error"]


def _health(rack: SlurmRack, node: str, tools: Path, record: Path):
    """The health check on the node itself, as slurmd runs it: root, only SLURMD_NODENAME."""
    host = next(h for h in rack.hosts if h.name == node)
    return host.exec(
        ["env", "-i", f"SLURMD_NODENAME={node}", f"PYTHONPATH={REPO_ROOT}", PYTHON, "-m",
         "rackcert.cli", "validate", str(rack.loaded.path), "--health-check",
         "--tool-path", str(tools / "{node}"), "--health-record", str(record)],
        timeout=60,
    )  # fmt: skip


def _gpus(tools: Path, node: str, count: int) -> None:
    """The node's (fake: CI has no GPU) nvidia-smi answers with `count` lab A100s."""
    where = tools / node
    where.mkdir(parents=True, exist_ok=True)
    link = where / "nvidia-smi"
    if not link.exists():
        link.symlink_to(REPO_ROOT / "tests" / "support" / "fakes" / "fake-nvidia-smi")
    config = {"gpus": count, "name": "NVIDIA A100 PCIe 80GB", "driver": "470.82.01",
              "nvlink": True}  # fmt: skip
    (where / "fake-nvidia-smi.json").write_text(json.dumps(config))


def test_health_check_drains_only_the_failing_node_and_resumes_only_its_own_drain(
    slurm_rack: SlurmRack, tmp_path: Path
) -> None:
    rack = slurm_rack
    tools, record = tmp_path / "tools", tmp_path / "health.jsonl"
    _gpus(tools, "node1", 1)  # one GPU of the template's two is gone
    _gpus(tools, "node2", 2)
    try:
        start = time.monotonic()
        bad = _health(rack, "node1", tools, record)
        assert time.monotonic() - start < 30
        assert bad.returncode == 1, bad.stdout + bad.stderr
        assert "slurm: drain" in bad.stdout, bad.stdout
        good = _health(rack, "node2", tools, record)
        assert good.returncode == 0, good.stdout + good.stderr
        seen = reasons(rack)
        assert list(seen) == ["node1"], seen
        assert seen["node1"].startswith("rackcert: gpu.count: "), seen
        assert rack.lab.node_states()["node2"] == "idle"

        _gpus(tools, "node1", 2)  # repaired
        fixed = _health(rack, "node1", tools, record)
        assert fixed.returncode == 0 and "slurm: resume" in fixed.stdout, fixed.stdout
        assert reasons(rack) == {}
        # Back in service: idle once slurmctld has pinged it after the resume (until then
        # sinfo may show idle* for a moment).
        rack.lab.wait_idle(["node1"], timeout=30)

        # An operator's drain stays, whether the check passes or fails.
        rack.lab.scontrol("update", "nodename=node2", "state=drain", "reason=operator: BIOS")
        passing = _health(rack, "node2", tools, record)
        assert passing.returncode == 0, passing.stdout
        _gpus(tools, "node2", 1)
        failing = _health(rack, "node2", tools, record)
        assert failing.returncode == 1, failing.stdout
        assert reasons(rack) == {"node2": "operator: BIOS"}
    finally:
        for node in ("node1", "node2"):
            rack.lab.scontrol("update", f"nodename={node}", "state=resume")
    entries = [json.loads(line) for line in record.read_text().splitlines()]
    assert [(e["node"], e["action"]) for e in entries] == [("node1", "drain"), ("node1", "resume")]
    assert entries[0]["failing"] == ["gpu.count"] or "gpu.count" in entries[0]["failing"]


def _wait(what, timeout: float = 120.0):  # noqa: ANN001 - a predicate
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.5)
    return what()


def _wrapper(rack: SlurmRack, tools: Path, record: Path) -> str:
    """What `rackcert slurm health-check-conf` tells a site to install, for this checkout
    (on the session rack's node3 and node4, which this spec does not name, nothing)."""
    return (
        "#!/bin/sh\n"
        + only_on(rack)
        + f"exec /usr/bin/env PYTHONPATH={REPO_ROOT} {PYTHON} -m rackcert.cli -q validate"
        f" {rack.loaded.path} --health-check --tool-path {tools}/{{node}}"
        f" --health-record {record}\n"
    )


def test_slurmd_runs_it_as_its_health_check_program(slurm_rack: SlurmRack, tmp_path: Path) -> None:
    """slurmd itself runs the check (HealthCheckProgram, every 5 s here, empty environment
    but SLURMD_NODENAME): it drains the failing node and resumes it once repaired."""
    rack = slurm_rack
    tools, record = tmp_path / "tools", tmp_path / "health.jsonl"
    _gpus(tools, "node1", 1)
    _gpus(tools, "node2", 2)
    program = rack.lab.health_check_program
    try:
        program.write_text(_wrapper(rack, tools, record))
        seen = _wait(lambda: reasons(rack).get("node1", "").startswith("rackcert: gpu.count"))
        assert seen, (reasons(rack), rack.lab.node_states())
        assert "node2" not in reasons(rack)
        _gpus(tools, "node1", 2)
        assert _wait(lambda: "node1" not in reasons(rack)), reasons(rack)
        rack.lab.wait_idle(["node1", "node2"], timeout=30)
    finally:
        program.write_text("#!/bin/sh\nexit 0\n")
        for node in ("node1", "node2"):
            rack.lab.scontrol("update", f"nodename={node}", "state=resume")
    actions = [(e["node"], e["action"]) for e in map(json.loads, record.read_text().splitlines())]
    assert actions[:2] == [("node1", "drain"), ("node1", "resume")], actions


def test_as_the_prolog_a_failure_drains_the_node_before_the_job_runs(
    slurm_rack: SlurmRack, tmp_path: Path
) -> None:
    rack = slurm_rack
    tools, record = tmp_path / "tools", tmp_path / "health.jsonl"
    _gpus(tools, "node1", 1)
    try:
        rack.lab.prolog.write_text(_wrapper(rack, tools, record))
        job = rack.lab.client("srun", "-w", "node1", "-N1", "--immediate=30", "true", timeout=90)
        assert job.returncode != 0 and "prolog failed" in job.stderr.lower(), job.stderr
        assert reasons(rack)["node1"].startswith("rackcert: gpu.count: "), reasons(rack)
        _gpus(tools, "node1", 2)  # repaired: the next health check resumes it
        fixed = _health(rack, "node1", tools, record)
        assert "slurm: resume" in fixed.stdout, fixed.stdout
        rack.lab.wait_idle(["node1"], timeout=30)
        again = rack.lab.client("srun", "-w", "node1", "-N1", "--immediate=30", "true", timeout=90)
        assert again.returncode == 0, again.stderr
    finally:
        rack.lab.prolog.write_text("#!/bin/sh\nexit 0\n")
        rack.lab.scontrol("update", "nodename=node1", "state=resume")


def test_lab_up_slurm_is_per_lab_and_writes_the_spec_with_its_block(tmp_path: Path) -> None:
    """`lab up --slurm`'s flow for a lab spec of its own name and subnet: the controller on
    the subnet's bridge, files under /run/rackcert-slurm/lab-<name>/, a spec that loads with
    its slurm block pointing there; `lab down`'s flow removes them."""
    from rackcert.core.spec_loader import load_spec
    from rackcert.lab.slurm import start_lab_slurm, stop_lab_slurm
    from rackcert.lab.sshhosts.network import claim_subnet, release_subnet

    subnet = claim_subnet()
    release_subnet(subnet)  # the lab owns its bridge: let start_lab_slurm make it
    base = subnet.rsplit(".", 1)[0]
    data = yaml.safe_load((REPO_ROOT / "inventories" / "lab.yaml").read_text())
    data["metadata"]["name"] = f"slurmlab{os.getpid()}"
    for i, vm in enumerate(data["vms"]):
        vm["address"] = f"{base}.{11 + i}"
    spec_path = tmp_path / "lab.yaml"
    spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
    spec = load_spec(spec_path).spec
    try:
        lab, written = start_lab_slurm(spec_path, spec, tmp_path / "work")
        assert lab.directory == Path(f"/run/rackcert-slurm/lab-slurmlab{os.getpid()}")
        assert lab.address == f"{base}.1" and lab.controller_up()
        slurm = load_spec(written).spec.slurm
        assert slurm is not None and slurm.client_conf == str(lab.conf)
        assert slurm.controller.address == lab.address and slurm.munge_key_file == str(
            lab.munge_key
        )
        # The nodes are known to the controller, not yet up (configure's role starts slurmd).
        assert set(lab.node_states()) == {"lab-node1", "lab-node2"}
    finally:
        stopped = stop_lab_slurm(spec, tmp_path / "work")
        release_subnet(subnet)
    assert stopped and not lab.directory.exists() and not written.exists()
