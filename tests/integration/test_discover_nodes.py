"""`spec discover --nodes`: the twin's VMs are real SSH test hosts with a FAKE nvidia-smi.

vCenter side: a twin whose VMs carry GPU passthrough devices (added through the API the
way provision does). Guest side: one SSH test host per VM (sshd in its own namespaces)
with tests/support/fakes/nvidia-smi-nvlink-pair or -pcie-pair as its nvidia-smi. The draft must
fill a pair the catalog cannot know (unknown server) and drop a pair the catalog names
but the guest shows as plain PCIe.
"""

from __future__ import annotations

import os
import shutil

import pytest
import yaml

from rackcert.core.spec_loader import load_spec
from tests.support.discover_helpers import (
    add_passthrough,
    rack_data,
    rackcert,
    running_twin,
    spec_of,
)
from tests.support.discover_twin import USER
from tests.support.paths import FAKES

CUSTOM_GPUS = ["0000:3b:00.0", "0000:d8:00.0"]


def in_use_spec(node1, node2) -> dict:
    """gpu01: a server model the catalog does not know; esx01: an R750xa (catalog pairs)."""
    data = rack_data(1)
    data["vcenter"] = {"host": "127.0.0.1", "port": 443, "user": USER, "password_env": "X"}
    r750 = data["hardware_profiles"][0]
    custom = {
        "name": "custom-a100x2",
        "server_model": "Custom GPU Server",
        "vendor": "Example Corp",
        "numa_nodes": 2,
        "gpus": [
            {"pci": pci, "model": "NVIDIA A100 PCIe 80GB", "memory_gb": 80, "numa": n}
            for n, pci in enumerate(CUSTOM_GPUS)
        ],
        "nics": [],
    }
    data["hardware_profiles"].append(custom)
    data["hosts"].append(
        {"name": "gpu01", "address": "gpu01.example.internal", "profile": custom["name"]}
    )
    data["vm_templates"] = [
        {"name": "two", "vcpus": 8, "memory_gb": 16, "gpus": 2, "nvlink": "none"},
        {"name": "pair", "vcpus": 8, "memory_gb": 16, "gpus": 2, "nvlink": "required"},
    ]
    data["vms"] = [
        {"name": "node1", "template": "two", "host": "gpu01", "address": node1.address},
        {
            "name": "node2",
            "template": "pair",
            "host": "esx01",
            "address": node2.address,
            "gpus": [r750["gpus"][0]["pci"], r750["gpus"][1]["pci"]],
        },
    ]
    data["guest"] = {"os": "debian-12", "ssh": {"user": "root", "key_file": str(node1.key_file)}}
    return data


def start(tmp_path, ssh_hosts):
    node1, node2 = ssh_hosts(["node1", "node2"])
    for host, fake in ((node1, "nvidia-smi-nvlink-pair"), (node2, "nvidia-smi-pcie-pair")):
        target = host.path("/usr/local/bin/nvidia-smi")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FAKES / fake, target)
        target.chmod(0o755)
    data = in_use_spec(node1, node2)
    spec_path = tmp_path / "in-use.yaml"
    spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
    return node1, node2, spec_of(data), spec_path


VMS = [
    {"name": "node1", "host": "gpu01.example.internal", "cpus": 8, "memory_mb": 16384},
    {"name": "node2", "host": "esx01.example.internal", "cpus": 8, "memory_mb": 16384},
]


def test_nodes_fill_and_correct_nvlink_peer(tmp_path, ssh_hosts):
    node1, node2, spec, spec_path = start(tmp_path, ssh_hosts)
    assert node1.ssh("nvidia-smi topo -m").stdout.count("NV12") == 2  # the fake is in place
    out, plain = tmp_path / "draft.yaml", tmp_path / "plain.yaml"
    with running_twin(spec, tmp_path / "twin", vms=VMS) as (started, files):
        # Passthrough order differs from PCI order on purpose: the mapping follows device keys.
        add_passthrough(
            started,
            files,
            USER,
            {"node1": list(reversed(CUSTOM_GPUS)), "node2": ["0000:17:00.0", "0000:31:00.0"]},
        )
        base = ["spec", "discover", "--from", str(spec_path), "--port", str(started.port)]
        base += ["--password-file", str(files.password_file), "--ca-file", str(files.cert_file)]
        without = rackcert(*base, "-o", str(plain))
        proc = rackcert(*base, "--nodes", "--known-hosts", str(node1.known_hosts), "-o", str(out))
        drift = rackcert(
            *base, "--nodes", "--known-hosts", str(node1.known_hosts), "--diff", str(spec_path)
        )
    assert without.returncode == 0, without.stderr
    assert proc.returncode == 0, proc.stdout + proc.stderr
    before, after = load_spec(plain).spec, load_spec(out).spec

    def peers(found, host):
        return {g.pci: g.nvlink_peer for g in found.host_profile(host).gpus}

    # Filled: the catalog does not know the custom server, the guest shows NV12.
    assert peers(before, "gpu01") == {CUSTOM_GPUS[0]: None, CUSTOM_GPUS[1]: None}
    assert peers(after, "gpu01") == {
        CUSTOM_GPUS[0]: CUSTOM_GPUS[1],
        CUSTOM_GPUS[1]: CUSTOM_GPUS[0],
    }
    # Corrected: the catalog's 17+31 pair is plain PCIe in the guest; b1+ca (no VM) is kept.
    assert peers(before, "esx01")["0000:17:00.0"] == "0000:31:00.0"
    assert peers(after, "esx01") == {
        "0000:17:00.0": None,
        "0000:31:00.0": None,
        "0000:b1:00.0": "0000:ca:00.0",
        "0000:ca:00.0": "0000:b1:00.0",
    }
    # The default layout follows what the guests showed.
    layout = {(v.host, tuple(v.gpus)) for v in after.vms}
    assert (("gpu01", tuple(CUSTOM_GPUS))) in layout
    assert ("esx01", ("0000:17:00.0",)) in layout and ("esx01", ("0000:31:00.0",)) in layout
    assert "nvidia-smi topo -m` showed it inside the VMs" in out.read_text()
    # --diff against the spec in use: both hosts' pairs differ, exit 1.
    assert drift.returncode == 1, drift.stdout + drift.stderr
    text = " ".join(drift.stdout.split())
    assert f"gpu01: GPU changed: {CUSTOM_GPUS[0]}: nvlink_peer None -> {CUSTOM_GPUS[1]}" in text
    assert "esx01: GPU changed: 0000:17:00.0: nvlink_peer 0000:31:00.0 -> None" in text


def test_unreachable_vm_is_one_error_naming_it_and_writes_nothing(tmp_path, ssh_hosts):
    node1, node2, spec, spec_path = start(tmp_path, ssh_hosts)
    node2.kill()
    out = tmp_path / "draft.yaml"
    with running_twin(spec, tmp_path / "twin", vms=VMS) as (started, files):
        add_passthrough(
            started, files, USER, {"node1": CUSTOM_GPUS, "node2": ["0000:17:00.0", "0000:31:00.0"]}
        )
        proc = rackcert(
            "spec",
            "discover",
            "--from",
            str(spec_path),
            "--port",
            str(started.port),
            "--password-file",
            str(files.password_file),
            "--ca-file",
            str(files.cert_file),
            "--nodes",
            "--known-hosts",
            str(node1.known_hosts),
            "-o",
            str(out),
        )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: --nodes: VM node2 (root@") and "SSH failed" in last
    assert "Traceback" not in proc.stderr and proc.stderr.startswith("read vCenter 127.0.0.1")
    assert not out.exists()


def test_nodes_needs_a_spec_with_the_vms(capsys):
    from rackcert.cli import main

    assert main(["spec", "discover", "--vcenter", "127.0.0.1", "--nodes"]) == 2
    assert "--nodes needs --from SPEC" in capsys.readouterr().err


def test_probe_names_a_vm_without_nvidia_smi_and_its_ssh_sees_no_secret(
    ssh_hosts, tmp_path, monkeypatch
):
    """The ssh client starts with rackcert.core.childenv's named variables, never this process's
    whole environment (before: every variable, the vCenter password's included). An `ssh`
    first on PATH records what the real client would have been given, then runs it."""
    from rackcert.core.errors import InputError
    from rackcert.core.ssh_target import SshTarget
    from rackcert.discover.nodes import Target, probe

    (bare,) = ssh_hosts(["bare"])
    seen, wrap = tmp_path / "ssh-env", tmp_path / "bin"
    wrap.mkdir()
    (wrap / "ssh").write_text(f'#!/bin/sh\nenv > {seen}\nexec /usr/bin/ssh "$@"\n')
    (wrap / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrap}:{os.environ['PATH']}")
    monkeypatch.setenv("RACKCERT_VCENTER_PASSWORD", "vc-Secret-For-Discover-7731")
    monkeypatch.setenv("SOME_CLOUD_TOKEN", "cloud-Token-4410")
    node = SshTarget(
        host=bare.address, identity_file=str(bare.key_file), known_hosts=str(bare.known_hosts)
    )
    with pytest.raises(InputError) as info:
        probe([Target("bare", node)], withheld=["RACKCERT_VCENTER_PASSWORD"])
    message = str(info.value)
    assert message.startswith(f"--nodes: VM bare (root@{bare.address}:22): nvidia-smi topo -m")
    assert "nvidia-smi not found (rc 127)" in message
    env = seen.read_text()
    assert f"PATH={wrap}:" in env, "the wrapper did not run: the test proves nothing"
    assert "vc-Secret-For-Discover-7731" not in env and "cloud-Token-4410" not in env


def test_nodes_after_rackcert_provision(rack_twin, ssh_hosts, tmp_path, capsys):
    """The VMs and their passthrough devices as `rackcert provision` made them on the twin."""
    from rackcert.cli import main
    from tests.support.spec_helpers import LAB, example_data

    node1, node2 = ssh_hosts(["node1", "node2"])
    for host, fake in ((node1, "nvidia-smi-nvlink-pair"), (node2, "nvidia-smi-pcie-pair")):
        target = host.path("/usr/local/bin/nvidia-smi")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FAKES / fake, target)
        target.chmod(0o755)
    data = example_data(LAB)
    data["vms"][0]["address"], data["vms"][1]["address"] = node1.address, node2.address
    data["guest"]["ssh"]["key_file"] = str(node1.key_file)
    source = tmp_path / "lab-ssh.yaml"
    source.write_text(yaml.safe_dump(data, sort_keys=False))
    lab = rack_twin(source, wait_for="ssh")  # its own SSH hosts answer at the addresses
    runs = tmp_path / "runs"
    assert main(["provision", str(lab.spec_path), "--yes", "--runs-dir", str(runs)]) == 0
    record = sorted(runs.rglob("provision.json"))[-1]
    out = tmp_path / "nodes.yaml"
    args = ["spec", "discover", "--from", str(lab.spec_path)]
    nodes = ["--nodes", "--known-hosts", str(node1.known_hosts)]
    assert main([*args, *nodes, "-o", str(out)]) == 0, capsys.readouterr().err
    found = load_spec(out).spec
    first, second = (found.host_profile(h).gpus for h in ("lab-esx01", "lab-esx02"))
    assert [g.nvlink_peer for g in first] == ["0000:31:00.0", "0000:17:00.0"]  # NV12: proven
    assert [g.nvlink_peer for g in second] == [None, None]  # SYS: the pair is not bridged
    capsys.readouterr()
    # The recorded inventory (provision.json) drafts the same hardware as the live twin.
    assert main([*args, "--inventory", str(record), "--diff", str(source)]) == 0
    assert "no drift" in capsys.readouterr().out
