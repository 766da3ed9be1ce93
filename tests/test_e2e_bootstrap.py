"""End to end on real components: bootstrap the lab rack (vcsim twin + SSH test hosts).

One fault is injected on the way: vCenter fails the task that creates the first
VM. The flow must stop at provision with the fault's own line, still write the
report of what was done, and `--resume` must finish the job from there. Then
the whole run is searched for the vCenter password and the SSH key material.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml

from rackcert.paths import REPO_ROOT
from rackcert.runs import list_runs

INJECTED = "injected: datastore lab-ds full"


def _bootstrap(spec_path, runs, *extra):
    return subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "bootstrap", str(spec_path), "--yes", "--quick",
         "--backend", "gloo", "--runs-dir", str(runs), *extra],
        capture_output=True, text=True, timeout=900, cwd=REPO_ROOT,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


def _lab(tmp_path, rack_twin, ssh_hosts):
    """The lab spec pointed at a fresh twin (with a fault) and at fresh SSH hosts."""
    twin = rack_twin(
        "inventories/lab.yaml",
        faults={"fail": [{"method": "CreateVM_Task", "count": 1, "message": INJECTED}]},
    )
    export = tmp_path / "export"
    export.mkdir()
    hosts = ssh_hosts(["lab-node1", "lab-node2"], shared=[export])
    data = yaml.safe_load(twin.spec_path.read_text())
    for vm, host in zip(data["vms"], hosts, strict=True):
        vm["address"] = host.address
    data["guest"]["ssh"]["key_file"] = str(hosts[0].key_file)
    data["storage"]["nfs"]["export"] = str(export)
    data["storage"]["nfs"]["mount_point"] = str(tmp_path / "mnt-data")
    spec_path = tmp_path / "lab-e2e.yaml"
    spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
    return twin, hosts, spec_path


def _stage(run, name):
    path = run / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def test_bootstrap_survives_a_task_fault_and_resumes(tmp_path, rack_twin, ssh_hosts):
    twin, hosts, spec_path = _lab(tmp_path, rack_twin, ssh_hosts)
    runs = tmp_path / "runs"

    first = _bootstrap(spec_path, runs)
    assert first.returncode != 0
    assert "Traceback" not in first.stderr + first.stdout
    last = first.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and INJECTED in last, first.stderr
    (run_summary,) = list_runs(runs)
    run = run_summary.path
    assert _stage(run, "plan")["status"] == "ok"
    provision = _stage(run, "provision")
    assert provision["status"] == "failed" and provision["error"]
    assert provision["data"]["done"], "what was done before the fault is recorded"
    assert _stage(run, "configure") is None
    report = _stage(run, "report")
    assert report["data"]["verdict"] in ("FAIL", "INCOMPLETE")
    assert (run / "report.html").is_file()

    second = _bootstrap(spec_path, runs, "--resume", str(run))
    assert "Traceback" not in second.stderr + second.stdout
    assert "plan: already recorded ok, skipped (--resume)" in second.stdout
    assert _stage(run, "provision")["status"] == "ok"
    configure = _stage(run, "configure")
    assert configure["status"] == "ok", configure["error"]
    validate = _stage(run, "validate")
    checks = {(r["node"], r["id"]): r["status"] for r in validate["data"]["results"]}
    assert checks[("lab-node1", "ssh.peers")] == "pass"
    assert checks[("lab-node2", "net.mtu")] == "pass"
    assert checks[("lab-node1", "gpu.count")] == "fail"  # the lab has no GPUs, honestly
    bench = _stage(run, "bench")
    assert bench["data"]["allreduce"]["world_size"] >= 2
    assert all(p["correct"] for p in bench["data"]["allreduce"]["points"])
    assert bench["data"]["resnet50"]["points"]
    # every stage record of the real run fits its published JSON Schema
    from tests.test_stage_records import validate_run_dir

    stages = ["plan", "provision", "configure", "validate", "bench", "report"]
    assert validate_run_dir(run) == stages
    html = (run / "report.html").read_text()
    assert _stage(run, "report")["data"]["verdict"] == "FAIL"
    assert "FAIL" in html and "gpu.count" in html
    assert f"report: {run.resolve() / 'report.html'}" in second.stdout.replace("\n", "")
    verify = subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "report", "verify", str(run)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stdout + verify.stderr

    password = twin.twin.files.password_file.read_text().strip()
    key_lines = [
        line for line in hosts[0].key_file.read_text().splitlines() if "PRIVATE KEY" not in line
    ]
    secrets = [password, *key_lines]
    for path in run.rglob("*"):
        if path.is_file():
            blob = path.read_bytes()
            for secret in secrets:
                assert secret.encode() not in blob, f"secret found in {path}"
    for secret in secrets:
        assert secret not in first.stdout + first.stderr + second.stdout + second.stderr
