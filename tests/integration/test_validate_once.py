"""validate reaches each node once: the checks' probes and the facts snapshot share one SSH
session per node, with one trust (the rack's known_hosts).

Counted where it cannot be faked: each SSH test host's own sshd log, whose INFO lines say
"Accepted publickey for USER from ADDRESS" once per authenticated connection. The controller
reaches the hosts from the test bridge's address (the subnet's .1); the nodes' ssh.peers
probes reach each other from their own addresses. Before, validate authenticated twice to
every node (testinfra for the probes, then pyinfra for facts.json, with a second known_hosts).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections import Counter

from tests.support.validate_nodes import A100, prepare, run_validate

_ACCEPTED = re.compile(r"Accepted publickey for (\S+) from (\S+) port \d+")


def _accepted(host) -> Counter[str]:
    """Authenticated connections to `host`, by the address they came from."""
    text = (host.runtime_dir / "sshd.log").read_text(errors="replace")
    return Counter(m.group(2) for m in _ACCEPTED.finditer(text))


def test_one_authenticated_connection_per_node_answers_checks_and_facts(
    ssh_hosts, fake_gpu_tools, tmp_path
):
    spec, tools, hosts = prepare(
        ssh_hosts, fake_gpu_tools, tmp_path, 2, {"node1": A100, "node2": A100}
    )
    controller = str(ipaddress.IPv4Network(hosts[0].subnet).network_address + 1)
    before = {h.name: _accepted(h) for h in hosts}
    runs = tmp_path / "runs"
    done = run_validate(str(spec), "--runs-dir", str(runs), "--tool-path", tools)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    data = json.loads(next(runs.glob("vtest/*/validate.json")).read_text())["data"]
    by = {(r["node"], r["id"]): r["status"] for r in data["results"]}
    assert by[("node1", "ssh.peers")] == "pass" and by[("node2", "ssh.peers")] == "pass"
    for h in hosts:
        got = _accepted(h) - before[h.name]
        assert got[controller] == 1, f"{h.name}: {got[controller]} logins from the controller"
        peer = next(p for p in hosts if p is not h)
        assert got[peer.address] == 1, f"{h.name}: ssh.peers from {peer.name}: {got}"
        assert set(got) == {controller, peer.address}, got
    # facts.json came from those same sessions: the fact classes' parsers over the answers,
    # exactly the facts gathered (the checks' and the report's snapshot), each once.
    facts = json.loads(next(runs.glob("vtest/*/facts.json")).read_text())
    assert data["facts"] == "facts.json"
    assert len(facts["facts"]) == len(set(facts["facts"])) and "ssh_peers" in facts["facts"]
    for h in hosts:
        node = facts["nodes"][h.name]
        assert "fact_errors" not in node, node["fact_errors"]
        assert node["hostname"] == h.name and node["kernel"] and node["arch"]
        assert node["os"]["name"] and node["os"]["release_meta"]
        points = {m["mount_point"] for m in node["mounts"]}
        assert "/" in points  # prepare() mounts the data export on node1 only:
        assert ("/mnt/rackcert-data" in points) is (h.name == "node1")
        assert node["deb_packages"]["openssh-server"] and node["rpm_packages"] == {}
        assert node["nics"]["interfaces"]["eth0"]["mtu"] == "1500"
        assert node["nics"]["mtu"]["eth0"] == 1500  # the value net.mtu judged
        assert node["sysctl"]["kernel.hostname"] == h.name
        # the GPU fact asked the same (FAKE) nvidia-smi the gpu.* checks judged
        assert [g["name"] for g in node["gpus"]] == [A100["name"]] * 2
