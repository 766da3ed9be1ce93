"""Multi-node launch for real: torchrun started over SSH on two test hosts (sshd in their
own network namespaces), one c10d rendezvous, a Gloo allreduce across the two, and the
storage benchmark run on both nodes at once. Needs root (the ssh_hosts fixture)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.support.spec_helpers import gateway_on_subnet_of

ROOT = Path(__file__).resolve().parents[2]


NODE_VENV = "/opt/rackcert/venv"


def _install_worker(hosts, tmp_path: Path) -> str:
    """What configure's dl_runtime role leaves on a node, without Ansible (fast): a venv
    over the node image's Python (which has torch: the lab DL stack) with rackcert's
    bench worker wheel installed offline. The hosts see neither this checkout nor .venv,
    so the worker can only come from there. Returns the nodes' Python."""
    from rackcert.configure.worker_wheel import build_worker_wheel

    wheel = build_worker_wheel(tmp_path / "wheels")  # /tmp is shared with the test hosts
    for h in hosts:
        out = h.ssh(
            f"python3 -m venv --system-site-packages --without-pip {NODE_VENV} && python3 -m pip"
            f" --python {NODE_VENV}/bin/python install -q --no-index --no-deps {wheel}",
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
    return f"{NODE_VENV}/bin/python"


def test_two_node_torchrun_gloo_allreduce_over_ssh(ssh_hosts, tmp_path: Path) -> None:
    h1, h2 = ssh_hosts(2)
    spec = yaml.safe_load((ROOT / "inventories" / "lab.yaml").read_text())
    spec["metadata"]["name"] = "lab-ssh"
    spec["vms"][0].update(address=h1.address, ssh_port=h1.port)
    spec["vms"][1].update(address=h2.address, ssh_port=h2.port)
    gateway_on_subnet_of(spec, h1.address)
    spec["guest"]["ssh"] = {"user": h1.user, "key_file": str(h1.key_file)}
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    data_dir = tmp_path / "data"  # /tmp is shared with the test hosts
    data_dir.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "bench", str(spec_path), "--nodes", "2",
         "--gpus-per-node", "1", "--backend", "gloo", "--quick", "--skip", "resnet",
         "--max-bytes", "1048576", "--known-hosts", str(h1.known_hosts),
         "--storage-dir", str(data_dir), "--synthetic-data",
         "--runs-dir", str(tmp_path / "runs"), "--json", "--timeout", "300",
         "--remote-python", _install_worker([h1, h2], tmp_path)],
        capture_output=True, text=True, timeout=600, cwd=ROOT, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-2000:]  # INCOMPLETE: --skip resnet
    assert proc.stdout.strip(), proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    assert data["mode"] == "ssh"
    ar = data["allreduce"]
    assert ar["world_size"] == 2 and ar["backend"] == "gloo"
    assert all(p["correct"] for p in ar["points"]) and len(ar["points"]) == 18
    assert ar["busbw_fraction"] is not None  # judged against the spec's 100 Gb/s link
    (launch,) = data["launches"]
    assert {r["host"] for r in launch["ranks"]} == {"node1", "node2"}
    commands = launch["commands"]
    assert [c[0] for c in commands] == ["ssh", "ssh"]
    assert f"root@{h1.address}" in commands[0] and f"root@{h2.address}" in commands[1]
    assert all(f"{h1.address}:29400" in c[-1] for c in commands)
    assert all(c[-3] == "--" for c in commands)  # nothing after it is an ssh option
    assert data["launch"]["launcher"] == "torchrun" and data["launch"]["controller"] == "c10d"
    assert data["environment"]["python_executable"] == f"{NODE_VENV}/bin/python"
    storage = data["storage"]
    assert [n["node"] for n in storage["nodes"]] == ["lab-node1", "lab-node2"]
    assert all(n["reads"] > 0 and n["errors"] == 0 for n in storage["nodes"])
    checks = {c["id"]: c["status"] for c in data["verdict"]["checks"]}
    assert checks["allreduce.correct"] == "pass" and checks["storage.read"] == "pass"
    # the lab asks 0.7 of its declared 0.1 Gb/s line rate at the largest sizes (256 KiB..
    # 1 MiB here); these test hosts' links are not shaped, so they carry more than that
    assert checks["allreduce.busbw_fraction"] == "pass", data["verdict"]
    assert data["verdict"]["verdict"] == "INCOMPLETE"
    assert any("resnet50.scaling_efficiency (required)" in n for n in data["verdict"]["not_judged"])


def test_unreachable_node_is_one_error_line_and_a_failed_record(ssh_hosts, tmp_path: Path) -> None:
    h1, h2 = ssh_hosts(2)
    # node1 is a working node (its worker installed), so the one failure is node2's: without
    # it node1's launch failed too ("No such file", exit 127), and whichever failure came
    # first was the one line (node2's "refused" only when its ssh lost the race).
    python = _install_worker([h1], tmp_path)
    h2.kill()
    spec = yaml.safe_load((ROOT / "inventories" / "lab.yaml").read_text())
    spec["vms"][0].update(address=h1.address, ssh_port=h1.port)
    spec["vms"][1].update(address=h2.address, ssh_port=h2.port)
    gateway_on_subnet_of(spec, h1.address)
    spec["guest"]["ssh"] = {"user": h1.user, "key_file": str(h1.key_file)}
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    proc = subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "bench", str(spec_path), "--nodes", "2",
         "--gpus-per-node", "1", "--backend", "gloo", "--quick", "--skip", "resnet,storage",
         "--max-bytes", "64", "--known-hosts", str(h1.known_hosts),
         "--runs-dir", str(tmp_path / "runs"), "--timeout", "120",
         "--remote-python", python],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert proc.returncode == 1
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "bench launch" in err and ("refused" in err or "exit 255" in err), err
    (record,) = (tmp_path / "runs").glob("lab/*/bench.json")
    assert json.loads(record.read_text())["status"] == "failed"
