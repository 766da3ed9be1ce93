"""validate over real SSH test hosts.

One run over three nodes broken three ways: node1 has the wrong driver (fake
nvidia-smi built from real H200 output), node2 lacks the storage mount, node3
lost its SSH client key (no trust to its peers): exactly those checks fail,
with their fix hints. Another run has a node killed before it starts: that node
is reported unreachable and the others finish.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
A100_MODEL = "NVIDIA A100 PCIe 80GB"


def os_id() -> str:
    info = dict(
        line.split("=", 1)
        for line in Path("/etc/os-release").read_text().splitlines()
        if "=" in line
    )
    return f"{info['ID'].strip(chr(34))}-{info['VERSION_ID'].strip(chr(34))}"


def write_spec(path: Path, hosts, export: Path) -> Path:
    vms = "\n".join(
        f"  - {{name: {h.name}, template: t2, host: esx{i + 1}, address: {h.address},"
        f" ssh_port: {h.port}}}"
        for i, h in enumerate(hosts)
    )
    esx = "\n".join(
        f"  - {{name: esx{i + 1}, address: esx{i + 1}.invalid, profile: p2}}"
        for i in range(len(hosts))
    )
    path.write_text(
        f"""apiVersion: rackcert/v1
kind: Rack
metadata: {{name: vtest}}
vcenter: {{host: 127.0.0.1, user: u, password_env: NOPE}}
hardware_profiles:
  - name: p2
    server_model: PowerEdge R750xa
    gpus:
      - {{pci: "0000:17:00.0", model: {A100_MODEL}, memory_gb: 80, nvlink_peer: "0000:31:00.0"}}
      - {{pci: "0000:31:00.0", model: {A100_MODEL}, memory_gb: 80, nvlink_peer: "0000:17:00.0"}}
hosts:
{esx}
vm_templates:
  - {{name: t2, vcpus: 4, memory_gb: 8, gpus: 2, nvlink: required, nic: vmxnet3}}
vms:
{vms}
guest:
  os: {os_id()}
  nvidia_driver: 470.82.01
  container_runtime: none
  ssh: {{user: root, key_file: {hosts[0].key_file}}}
storage:
  nfs: {{server: 127.0.0.1, export: {export}, mount_point: /mnt/rackcert-data, options: [bind],
         fstype: none}}
network: {{mtu: 1500}}
"""
    )
    return path


A100 = {"gpus": 2, "nvlink": True, "name": "NVIDIA A100 80GB PCIe", "driver": "470.82.01"}


def prepare(ssh_hosts, fake_gpu_tools, tmp_path, count: int, configs: dict):
    hosts = ssh_hosts(count)
    export = tmp_path / "export"
    export.mkdir()
    for h in hosts:
        ssh_dir = h.path("/root/.ssh")
        ssh_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy(h.key_file, ssh_dir / "id_ed25519")  # trust: the key every host authorizes
        (ssh_dir / "id_ed25519").chmod(0o600)
        if h.name != "node2":
            h.exec(["mkdir", "-p", "/mnt/rackcert-data"])
            done = h.exec(["mount", "--bind", str(export), "/mnt/rackcert-data"])
            assert done.returncode == 0, done.stderr
    tools = fake_gpu_tools(configs)
    return write_spec(tmp_path / "vtest.yaml", hosts, export), tools, hosts


@pytest.fixture
def broken_rack(ssh_hosts, fake_gpu_tools, tmp_path):
    configs = {"node1": {**A100, "driver": "535.54.03"}, "node2": A100, "node3": A100}
    spec, tools, hosts = prepare(ssh_hosts, fake_gpu_tools, tmp_path, 3, configs)
    (hosts[2].path("/root/.ssh") / "id_ed25519").unlink()  # node3: no key, no trust
    return spec, tools, hosts


def run_validate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "validate", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_broken_nodes_fail_exactly_their_checks(broken_rack, tmp_path):
    spec, tools, _hosts = broken_rack
    runs, junit = tmp_path / "runs", tmp_path / "ci.xml"
    done = run_validate(
        str(spec), "--runs-dir", str(runs), "--tool-path", tools, "--junit", str(junit)
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert done.stderr.startswith("error: validate failed: 3 error-severity check(s) failed")
    record = json.loads(next(runs.glob("vtest/*/validate.json")).read_text())
    data = record["data"]
    results = data["results"]
    failing = {
        (r["node"], r["id"])
        for r in results
        if r["severity"] == "error" and r["status"] in ("fail", "error")
    }
    assert failing == {("node1", "gpu.driver"), ("node2", "storage.mount"), ("node3", "ssh.peers")}
    by = {(r["node"], r["id"]): r for r in results}
    assert by[("node1", "gpu.driver")]["observed"] == "535.54.03"
    assert "nvidia_driver" in by[("node1", "gpu.driver")]["fix"]
    assert by[("node2", "storage.mount")]["reason"] == "mount missing"
    assert "node1" in by[("node3", "ssh.peers")]["reason"]
    assert "ssh_trust" in by[("node3", "ssh.peers")]["fix"]
    for node in ("node1", "node2", "node3"):
        assert data["nodes"][node]["reachable"] is True
        for ok in ("gpu.count", "gpu.model", "gpu.nvlink.active", "net.mtu", "node.reachable"):
            assert by[(node, ok)]["status"] == "pass", by[(node, ok)]
    assert record["status"] == "failed" and data["summary"]["ok"] is False
    # JUnit: one suite per node, failures where the record has them.
    suites = {s.get("name"): s for s in ET.parse(junit).getroot()}
    assert suites["node1"].find("testcase[@name='gpu.driver']/failure") is not None
    assert suites["node1"].find("testcase[@name='gpu.count']/failure") is None
    # The per-node table is printed.
    for node in ("node1", "node2", "node3"):
        assert node in done.stdout
    # pyinfra's facts snapshot covers the live nodes.
    facts = json.loads(next(runs.glob("vtest/*/facts.json")).read_text())
    assert facts["nodes"]["node1"]["kernel"]


@pytest.mark.slow
def test_unreachable_node_is_a_failed_node_and_the_rest_finish(ssh_hosts, fake_gpu_tools, tmp_path):
    spec, tools, hosts = prepare(
        ssh_hosts, fake_gpu_tools, tmp_path, 2, {"node1": A100, "node2": A100}
    )
    hosts[1].kill()
    runs = tmp_path / "runs"
    done = run_validate(
        str(spec),
        "--runs-dir",
        str(runs),
        "--tool-path",
        tools,
        "--check",
        "gpu",
        "--check",
        "node",
        "--check",
        "storage",
    )
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr
    data = json.loads(next(runs.glob("vtest/*/validate.json")).read_text())["data"]
    assert data["nodes"]["node2"]["reachable"] is False
    assert data["nodes"]["node2"]["status"] == "failed"
    assert data["summary"]["failing"] == ["node2:node.reachable"]
    by = {(r["node"], r["id"]): r for r in data["results"]}
    assert by[("node2", "node.reachable")]["reason"]  # ssh's own words: refused / timed out
    assert by[("node2", "gpu.driver")]["status"] == "skip"
    assert all(by[("node1", c)]["status"] == "pass" for c in ("gpu.driver", "storage.mount"))
    assert data["nodes"]["node1"]["status"] == "passed"
    facts = json.loads(next(runs.glob("vtest/*/facts.json")).read_text())
    assert "error" in facts["nodes"]["node2"] and facts["nodes"]["node1"]["kernel"]
