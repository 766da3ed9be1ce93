"""A node dying in the middle of validate: it fails, the other finishes, the record is whole."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from rackcert.lab.sshhosts.network import netns_pids
from tests.support.validate_nodes import A100, ROOT, prepare


def _slow_nvidia_smi(tools: str, node: str) -> None:
    """node's nvidia-smi waits 20 s first, so validate is surely mid-probe when we kill it."""
    link = Path(tools.replace("{node}", node)) / "nvidia-smi"
    target = link.resolve()
    link.unlink()
    link.write_text(f'#!/bin/sh\nsleep 20\nexec {target} "$@"\n')
    link.chmod(0o755)


def _sleeping(netns: str) -> bool:
    for pid in netns_pids(netns):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "sleep":
                return True
        except OSError:
            continue
    return False


def test_node_killed_mid_validate(ssh_hosts, fake_gpu_tools, tmp_path):
    spec, tools, hosts = prepare(
        ssh_hosts, fake_gpu_tools, tmp_path, 2, {"node1": A100, "node2": A100}
    )
    # node2 also has the data mount, so only the kill can fail it.
    hosts[1].exec(["mkdir", "-p", "/mnt/rackcert-data"])
    hosts[1].exec(["mount", "--bind", str(tmp_path / "export"), "/mnt/rackcert-data"])
    _slow_nvidia_smi(tools, "node2")
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rackcert.cli", "validate", str(spec), "--runs-dir", str(runs),
         "--tool-path", tools, "--check", "gpu", "--check", "node", "--check", "storage",
         "--no-facts"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not _sleeping(hosts[1].netns):
        assert time.monotonic() < deadline, "node2's probe never started"
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    hosts[1].kill()
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1 and "Traceback" not in out + err
    assert err.strip().splitlines()[-1].startswith("error: validate failed")
    data = json.loads(next(runs.glob("vtest/*/validate.json")).read_text())["data"]
    assert data["nodes"]["node2"]["status"] == "failed"
    assert data["nodes"]["node1"]["status"] == "passed"
    by = {(r["node"], r["id"]): r for r in data["results"]}
    assert by[("node1", "gpu.driver")]["status"] == "pass"
    assert by[("node1", "storage.mount")]["status"] == "pass"
    assert all(f.startswith("node2:") for f in data["summary"]["failing"])
