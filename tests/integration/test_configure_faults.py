"""Faults during configure: a host killed mid-run, an unsupported distribution, check mode.

A failing host fails alone: the others finish, the record says which host and
why, and the command exits non-zero after printing the per-host summary.
"""

from __future__ import annotations

import json
import subprocess
import sys

from rackcert.configure.runner import configure
from rackcert.core.runs import RunDir
from tests.support.plugins.configure import air_gap, spec_for_hosts

FAKE_OS = 'NAME="Plan 9 from Rack Space"\nID=rackcertplan9\nVERSION_ID="4"\n'


def test_host_killed_mid_run_is_unreachable_while_the_other_finishes(ssh_hosts, tmp_path):
    h1, h2 = ssh_hosts(["node1", "node2"], shared=[tmp_path / "export"])
    loaded = spec_for_hosts([h1, h2], tmp_path, export=tmp_path / "export")
    run = RunDir.create(tmp_path / "runs", "lab", loaded.sha256, loaded.text)
    killed: list[str] = []

    def kill_node2(event, collector):
        # As soon as the network role starts, node2 dies (sshd and its sessions).
        starts = event.get("event") == "playbook_on_task_start"
        if starts and not killed and event["event_data"].get("role") == "network":
            h2.kill()
            killed.append(collector.current_task)

    result = configure(loaded, run, tags=["network", "storage_nfs"], on_event=kill_node2)
    assert killed
    assert result.status == "failed"
    by_name = result.data.hosts
    assert by_name["node2"].unreachable and by_name["node2"].status == "unreachable"
    assert by_name["node1"].status == "changed" and by_name["node1"].failed == 0
    # node1 went on to the storage role after node2 was gone.
    assert "storage_nfs : Mount the export" in by_name["node1"].changed_tasks
    assert h1.path("/sys/class/net/eth0/mtu").read_text().strip() == "9000"
    record = json.loads((run.path / "configure.json").read_text())
    assert record["status"] == "failed"
    assert record["error"].startswith("1 of 2 hosts not configured: node2 unreachable")
    assert record["data"]["hosts"]["node2"]["unreachable"] is True
    assert record["data"]["hosts"]["node2"]["failures"][0]["message"].startswith("unreachable:")


def test_check_mode_changes_nothing_and_unknown_distro_fails_alone(
    ssh_hosts, fake_vendor_repo, tmp_path
):
    good, odd = ssh_hosts(["good", "odd"])
    air_gap([good, odd])
    release = odd.path("/etc/os-release")
    release.unlink()
    release.write_text(FAKE_OS)
    # Ansible's own strategy (guest.ansible_strategy: linear), the way out where Mitogen cannot
    # drive a node: the same findings, one line, the same record.
    loaded = spec_for_hosts(
        [good, odd], tmp_path, sources=fake_vendor_repo.sources,
        guest={"ansible_strategy": "linear"},
    )  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "configure", str(loaded.path), "--check"]
        + ["--tags", "vendor,network", "--runs-dir", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert "Traceback" not in out
    # One error line naming the host and the distribution; the summary came first.
    assert "what would change" in proc.stdout
    assert "unsupported distribution Plan 9 from Rack Space" in " ".join(proc.stderr.split())
    assert proc.stderr.count("error:") == 1
    record_path = next((tmp_path / "runs").rglob("configure.json"))
    record = json.loads(record_path.read_text())
    hosts = record["data"]["hosts"]
    assert record["data"]["strategy"] == "linear"
    artifacts = record_path.parent / record["data"]["artifacts"]
    envvars = json.loads((artifacts / "env" / "envvars").read_text())
    assert envvars["ANSIBLE_STRATEGY"] == "linear"
    assert "ANSIBLE_STRATEGY_PLUGINS" not in envvars
    assert hosts["odd"]["status"] == "failed"
    assert hosts["good"]["status"] == "changed"
    assert "network : Report the MTU change (check mode)" in hosts["good"]["changed_tasks"]
    assert "vendor_package : Add the package source" in hosts["good"]["changed_tasks"]
    # Check mode changed nothing on the host.
    assert good.path("/sys/class/net/eth0/mtu").read_text().strip() == "1500"
    assert not list(good.path("/etc/apt/sources.list.d").glob("rackcert-*"))
    assert good.exec(["dpkg", "-s", "rackcert-fake-cuda-drivers-470"]).returncode != 0
