"""The validate suite started the testinfra way gives what `rackcert validate` gives.

`pytest --hosts=ssh://root@ADDR,... --rackcert-spec SPEC validation/suite` against real
SSH test hosts, then `rackcert validate --junit` against the same hosts: the same
(node, check, status) results, rackcert's JUnit the same cases, and pytest's own
--junitxml counts what validate's record counts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.validate_nodes import A100, prepare, run_validate

ROOT = Path(__file__).resolve().parents[2]
CHECKS = ("node.reachable", "gpu", "net.mtu", "storage.mount", "ssh.peers")


def _cases(path: Path) -> set[tuple[str, str, str]]:
    """(node, check, outcome) of every case in a rackcert JUnit file."""
    out = set()
    for case in ET.parse(path).getroot().iter("testcase"):
        state = "pass"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                state = tag
        out.add((case.get("classname", ""), case.get("name", ""), state))
    return out


@pytest.mark.slow
def test_pytest_with_hosts_and_spec_agrees_with_rackcert_validate(
    ssh_hosts, fake_gpu_tools, tmp_path
):
    configs = {"node1": {**A100, "driver": "535.54.03"}, "node2": A100, "node3": A100}
    spec, tools, hosts = prepare(ssh_hosts, fake_gpu_tools, tmp_path, 3, configs)
    for h in hosts:  # what the ssh_trust role does: the peers' keys in the nodes' known_hosts
        (h.path("/root/.ssh") / "known_hosts").write_text(hosts[0].known_hosts.read_text())
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text(
        f"Host *\n  UserKnownHostsFile {hosts[0].known_hosts}\n  IdentityFile {hosts[0].key_file}\n"
    )
    urls = ",".join(f"ssh://root@{h.address}:{h.port}" for h in hosts)
    picks = [a for c in CHECKS for a in ("--rackcert-check", c)]
    ours, xml = tmp_path / "pytest-rackcert.xml", tmp_path / "pytest-own.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "validation/suite", f"--hosts={urls}",
         "--ssh-config", str(ssh_config), "--rackcert-spec", str(spec), *picks,
         "--rackcert-tool-path", tools, "--rackcert-junit", str(ours), "--junitxml", str(xml),
         "--rackcert-results", str(tmp_path / "results.json"), "-q", "-p", "no:cacheprovider"],
        capture_output=True, text=True, cwd=ROOT, timeout=300, check=False,
        env={**{k: v for k, v in os.environ.items() if k != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"},
             "COLUMNS": "300"},
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]  # node1's driver
    failed_lines = [ln for ln in done.stdout.splitlines() if ln.startswith("FAILED")]
    driver = [ln for ln in failed_lines if "node1::gpu.driver" in ln]
    assert driver and "gpu.driver on node1: " in driver[0] and "(fix: " in driver[0], failed_lines
    assert "raise CheckFailed" not in done.stdout  # the check's line, not test_check's traceback

    runs, junit = tmp_path / "runs", tmp_path / "validate.xml"
    picks = [a for c in CHECKS for a in ("--check", c)]
    validated = run_validate(
        str(spec), "--runs-dir", str(runs), "--tool-path", tools, "--junit", str(junit),
        "--no-facts", "--ssh-config", str(ssh_config), *picks,
    )  # fmt: skip
    assert validated.returncode == 1, validated.stderr
    data = json.loads(next(runs.glob("vtest/*/validate.json")).read_text())["data"]
    guest = {(r["node"], r["id"], r["status"]) for r in data["results"] if r["node"] != "vtest"}
    pytest_way = {
        (r["node"], r["id"], r["status"])
        for r in json.loads((tmp_path / "results.json").read_text())
    }
    assert pytest_way == {g for g in guest if not g[1].startswith("hv.")}
    hv = {c for c in _cases(junit) if c[1].startswith("hv.")}
    assert _cases(ours) == _cases(junit) - hv
    suite = ET.parse(xml).getroot().find("testsuite")
    assert suite is not None
    counts = data["summary"]
    failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
    guest_failed = sum(1 for g in pytest_way if g[2] in ("fail", "error"))
    assert failed == guest_failed and int(suite.get("skipped", 0)) == sum(
        1 for g in pytest_way if g[2] == "skip"
    )
    assert counts["failed"] >= 1 and ("node1", "gpu.driver", "fail") in pytest_way


def test_a_host_the_spec_does_not_name_is_one_usage_error(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "validation/suite", "--hosts=ssh://root@192.0.2.99",
         "--rackcert-spec", "inventories/lab.yaml", "-q", "-p", "no:cacheprovider"],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
        env={k: v for k, v in os.environ.items() if k != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"},
    )  # fmt: skip
    assert done.returncode == 4, done.stdout + done.stderr
    assert "192.0.2.99: not a VM of the spec" in done.stderr
    assert "Traceback" not in done.stderr
