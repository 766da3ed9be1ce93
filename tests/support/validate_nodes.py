"""What more than one test module needs from the old test_validate_nodes.py:
tests/integration/test_e2e_node_faults.py, tests/integration/test_host_keys.py,
tests/integration/test_metrics_prometheus.py, tests/integration/test_validate_nodes.py,
tests/integration/test_validate_once.py, tests/integration/test_validate_peers.py,
tests/integration/test_validate_testinfra.py, tests/unit/test_validate_peers.py.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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


def run_validate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "validate", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
