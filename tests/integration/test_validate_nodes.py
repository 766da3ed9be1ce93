"""validate over real SSH test hosts.

One run over three nodes broken three ways: node1 has the wrong driver (fake
nvidia-smi built from real H200 output), node2 lacks the storage mount, node3
lost its SSH client key (no trust to its peers): exactly those checks fail,
with their fix hints. Another run has a node killed before it starts: that node
is reported unreachable and the others finish.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from tests.support.validate_nodes import (
    A100,
    prepare,
    run_validate,
)


@pytest.fixture
def broken_rack(ssh_hosts, fake_gpu_tools, tmp_path):
    configs = {"node1": {**A100, "driver": "535.54.03"}, "node2": A100, "node3": A100}
    spec, tools, hosts = prepare(ssh_hosts, fake_gpu_tools, tmp_path, 3, configs)
    (hosts[2].path("/root/.ssh") / "id_ed25519").unlink()  # node3: no key, no trust
    return spec, tools, hosts


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
