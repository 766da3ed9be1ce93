"""A lab VM power-cycled through the twin comes back as the same machine, as a VM does.

Real twin, real pyVmomi, the lab's guest agent as `rackcert lab up` runs it, real sshd: a VM
keeps its virtual disk and the host key its first boot made across a power-off and a power-on
(so the rack's known_hosts still holds and what configure installed is still there), and its
boot runs what the guest enabled in /etc/rc.local (systemd's rc-local.service on a VM) and
mounts its /etc/fstab; a VM
destroyed takes its files with it (Destroy_Task deletes them), so a new clone boots afresh.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.support.vsphere_helpers import cli, vm_named

pytestmark = pytest.mark.integration

ENABLED = "#!/bin/sh\necho booted >> /var/lib/rackcert-boots\n"


def _host_key(address: str) -> str:
    """The ED25519 host key sshd at `address` answers with (`type base64`), as ssh-keyscan
    reads it over the network; "" while nothing answers."""
    out = subprocess.run(
        ["ssh-keyscan", "-T", "5", "-t", "ed25519", address],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    for line in out.stdout.splitlines():
        words = line.split()
        if len(words) >= 3 and not line.startswith("#"):
            return " ".join(words[1:3])
    return ""


def _ssh(key: str, known_hosts: Path, address: str, command: str) -> subprocess.CompletedProcess:
    """SSH with strict host key checking against `known_hosts`: the enrolled key or nothing."""
    return subprocess.run(
        ["ssh", "-i", key, "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
         "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={known_hosts}",
         "-o", "ConnectTimeout=5", f"root@{address}", command],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip


def _answers(key: str, known_hosts: Path, address: str, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _ssh(key, known_hosts, address, "true").returncode == 0:
            return True
        time.sleep(0.5)
    return False


def test_a_power_cycled_lab_vm_keeps_its_host_key_and_its_disk(agent_lab, capsys, tmp_path):
    from provision.apply import wait_task

    lab = agent_lab()
    node1, node2 = lab.spec.vms
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err
    key = str(lab.spec.guest.ssh.key_file)
    enrolled = _host_key(str(node1.address))
    assert enrolled.startswith("ssh-ed25519 "), enrolled
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(f"{node1.address} {enrolled}\n")
    # What a configure run leaves on the node: a package's files, a root's file, a service
    # enabled at boot (without systemd, in /etc/rc.local), a mount recorded in /etc/fstab.
    setup = _ssh(
        key, known_hosts, str(node1.address),
        "echo kept > /root/kept && mkdir -p /opt/site && echo 1.2.3 > /opt/site/VERSION"
        f" && printf '{ENABLED}' > /etc/rc.local && chmod 0755 /etc/rc.local"
        " && mkdir -p /srv/export /mnt/data && echo shared > /srv/export/file"
        " && echo '/srv/export /mnt/data none bind 0 0' >> /etc/fstab",
    )  # fmt: skip
    assert setup.returncode == 0, setup.stderr

    with lab.connect() as si:
        wait_task(vm_named(si, node1.name).PowerOffVM_Task(), "power off")
    assert lab.agent.wait_for({node2.name}, timeout=30), lab.agent.events
    assert _host_key(str(node1.address)) == ""  # off: nothing answers at its address
    with lab.connect() as si:
        wait_task(vm_named(si, node1.name).PowerOnVM_Task(), "power on")
    assert lab.agent.wait_for({node1.name, node2.name}, timeout=60), lab.agent.events

    # The same machine: the enrolled key still holds (strict checking), its files are there,
    # its boot ran what it enabled, once, and mounted what its fstab lists.
    assert _answers(key, known_hosts, str(node1.address)), lab.agent.events
    assert _host_key(str(node1.address)) == enrolled
    after = _ssh(
        key, known_hosts, str(node1.address),
        "cat /root/kept /opt/site/VERSION /var/lib/rackcert-boots /mnt/data/file"
        " && findmnt -n -o TARGET /mnt/data",
    )  # fmt: skip
    assert after.returncode == 0, after.stderr
    assert after.stdout.split() == ["kept", "1.2.3", "booted", "shared", "/mnt/data"]
    # The other VM's boot ran nothing of node1's: its disk is its own.
    other = lab.agent.guests[node2.name].host
    assert not other.path("/var/lib/rackcert-boots").exists()
    assert not other.path("/root/kept").exists()

    # Destroyed, the VM's files go with it: nothing of it is left for a new clone of its name.
    files = lab.agent.state_dir / node1.name
    assert (files / "disk").is_dir()
    with lab.connect() as si:
        vm = vm_named(si, node1.name)
        wait_task(vm.PowerOffVM_Task(), "power off")
        wait_task(vm.Destroy_Task(), "destroy")
    assert lab.agent.wait_for({node2.name}, timeout=30), lab.agent.events
    deadline = time.monotonic() + 30
    while files.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not files.exists(), lab.agent.events
