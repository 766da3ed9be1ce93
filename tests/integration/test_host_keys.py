"""Host keys: enrolled once per rack and shown, then enforced; a pinned spec enrols nothing.

Real sshd test hosts. A node whose host key changes between runs (its sshd re-keyed and
reloaded, as an impostor on the guest network would look) must be refused, never trusted
anew; before, every run trusted whatever answered into a fresh known_hosts.
"""

from __future__ import annotations

import json
import subprocess

from tests.support.host_keys import rekey as _rekey
from tests.support.validate_nodes import A100, prepare, run_validate


def _validate(spec, runs, tools) -> tuple[subprocess.CompletedProcess[str], dict]:
    done = run_validate(
        str(spec),
        "--runs-dir",
        str(runs),
        "--tool-path",
        tools,
        "--check",
        "node.reachable",
        "--no-facts",
    )
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    newest = sorted(runs.glob("vtest/*/validate.json"))[-1]
    return done, json.loads(newest.read_text())["data"]


def _host_pub(host) -> str:
    """The public half of the key the host's sshd serves (its runtime copy)."""
    key = host.runtime_dir / "ssh_host_ed25519_key"
    done = subprocess.run(["ssh-keygen", "-y", "-f", str(key)], capture_output=True, text=True)
    return done.stdout


def _fingerprint(pub: str) -> str:
    done = subprocess.run(
        ["ssh-keygen", "-lf", "-"], input=pub, capture_output=True, text=True, check=True
    )
    return done.stdout.split()[1]


def test_keys_enrolled_once_then_a_changed_key_is_refused(ssh_hosts, fake_gpu_tools, tmp_path):
    spec, tools, hosts = prepare(
        ssh_hosts, fake_gpu_tools, tmp_path, 2, {"node1": A100, "node2": A100}
    )
    runs = tmp_path / "runs"
    done, first = _validate(spec, runs, tools)
    assert done.returncode == 0, done.stdout + done.stderr
    rack_file = runs / "vtest" / "known_hosts"
    assert first["host_keys"]["known_hosts"] == str(rack_file) and rack_file.is_file()
    enrolled = {e["host"]: e["fingerprint"] for e in first["host_keys"]["enrolled"]}
    for h in hosts:
        assert enrolled[h.address] == _fingerprint(_host_pub(h))
        assert f"enrolled host key of {h.address}" in done.stdout
    done, second = _validate(spec, runs, tools)
    assert done.returncode == 0 and second["host_keys"]["enrolled"] == []
    assert "enrolled host key" not in done.stdout

    before = rack_file.read_bytes()
    _rekey(hosts[1])
    done, third = _validate(spec, runs, tools)
    assert "Host key verification failed" in third["nodes"]["node2"]["error"]
    assert third["nodes"]["node2"]["reachable"] is False, "a changed host key was trusted"
    assert third["nodes"]["node1"]["status"] == "passed"
    assert third["host_keys"]["enrolled"] == [] and rack_file.read_bytes() == before


def test_pinned_keys_are_the_only_ones_trusted(ssh_hosts, fake_gpu_tools, tmp_path):
    spec, tools, hosts = prepare(
        ssh_hosts, fake_gpu_tools, tmp_path, 2, {"node1": A100, "node2": A100}
    )
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    real = _host_pub(hosts[0]).split()[:2]
    fake = stranger.with_suffix(".pub").read_text().split()[:2]
    pins = tmp_path / "pinned_known_hosts"
    pins.write_text(f"{hosts[0].address} {' '.join(real)}\n{hosts[1].address} {' '.join(fake)}\n")
    text = spec.read_text().replace("key_file: ", f"known_hosts: {pins}, key_file: ")
    spec.write_text(text)
    runs = tmp_path / "runs"
    done, data = _validate(spec, runs, tools)
    assert data["host_keys"] == {"known_hosts": str(pins), "pinned": True, "enrolled": []}
    assert data["nodes"]["node1"]["status"] == "passed", data["results"]
    assert data["nodes"]["node2"]["reachable"] is False
    assert not (runs / "vtest" / "known_hosts").exists()


def test_a_peer_whose_key_changed_fails_ssh_peers_from_the_other_node(
    ssh_hosts, fake_gpu_tools, tmp_path
):
    """Node-to-node SSH trusts the keys the controller enrolled, strictly. The controller
    enrols both nodes; then node2's address answers with another key before node1 ever
    contacted it. Before, node1's probe (accept-new, into the node's own known_hosts) took
    the new key as a first contact and passed."""
    spec, tools, hosts = prepare(
        ssh_hosts, fake_gpu_tools, tmp_path, 2, {"node1": A100, "node2": A100}
    )
    runs = tmp_path / "runs"
    done, first = _validate(spec, runs, tools)
    assert done.returncode == 0 and len(first["host_keys"]["enrolled"]) == 2, done.stdout
    peers = run_validate(
        str(spec), "--runs-dir", str(runs), "--tool-path", tools,
        "--check", "ssh.peers", "--no-facts",
    )  # fmt: skip
    assert peers.returncode == 0, peers.stdout + peers.stderr
    for h in hosts:  # the enrolled keys travel with the probe: no node trusted anything anew
        assert not h.path("/root/.ssh/known_hosts").exists(), f"{h.name} recorded a key"
    _rekey(hosts[1])
    done = run_validate(
        str(spec), "--runs-dir", str(runs), "--tool-path", tools,
        "--check", "node.reachable", "--check", "ssh.peers", "--no-facts",
    )  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr
    data = json.loads(sorted(runs.glob("vtest/*/validate.json"))[-1].read_text())["data"]
    by = {(r["node"], r["id"]): r for r in data["results"]}
    peer_check = by[("node1", "ssh.peers")]
    assert peer_check["status"] == "fail", "node1 trusted node2's new key"
    assert peer_check["reason"] == (
        "node2 (its host key is not the one enrolled: Host key verification failed)"
    )
    assert data["nodes"]["node2"]["reachable"] is False  # the controller refuses it too


def test_lookup_reads_plain_and_hashed_entries_as_ssh_keygen_finds_them(tmp_path):
    """known()/peer_lines() read the file in-process (no ssh-keygen per node and peer); the
    answers are ssh-keygen -F's, hashed names included; patterns are left to ssh-keygen."""
    from rackcert.core.known_hosts import _keygen_lookup, lookup

    key = "AAAAC3NzaC1lZDI1NTE5AAAAIBq3nTPdGBd4BZ9Ppqgyw2FY1JhT7z7ZcVzG3O5Hk1Dm"
    path = tmp_path / "known_hosts"
    path.write_text(
        f"10.0.0.1 ssh-ed25519 {key}\n[10.0.0.2]:2222,node2 ssh-ed25519 {key}\n"
        f"10.0.0.3 ssh-ed25519 {key}\n"
    )
    subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(path)], check=True, capture_output=True)
    path.write_text(path.read_text() + f"10.0.0.4 ssh-ed25519 {key}\n")  # plain and hashed
    for name in ("10.0.0.1", "[10.0.0.2]:2222", "node2", "10.0.0.3", "10.0.0.4", "10.0.0.9"):
        assert lookup(path, name) == _keygen_lookup(path, name), name
    assert lookup(path, "10.0.0.1")[0].startswith("|1|") and not lookup(path, "10.0.0.9")
    path.write_text(f"10.0.0.* ssh-ed25519 {key}\n")  # a pattern: ssh-keygen decides
    assert lookup(path, "10.0.0.7") == _keygen_lookup(path, "10.0.0.7")
