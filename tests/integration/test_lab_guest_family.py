"""A lab whose spec says guest.os rhel-9 boots its VMs as RHEL 9 stand-ins, and keeps them so.

Real twin, real pyVmomi, the lab's guest agent as `rackcert lab up` runs it, real sshd, real
Ansible: one VM of inventories/lab.yaml, guest.os rhel-9, provisioned (cloned, powered on);
its first boot made it a stand-in (rackcert.lab.guestfamily: Debian 12 underneath, RHEL 9's
identity, rpm's own database with the lab's redhat-release, dnf). Judged over SSH (rpm, dnf,
the identity files) and through configure's own facts path: `rackcert configure --check`
gathers Ansible's facts, and prints and records the family the node was found to be. A power
cycle keeps the family and what was written since (a versionlock entry), as a VM's disk does.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.vsphere_helpers import cli, last_record, vm_named

pytestmark = pytest.mark.integration

FOUND = "RedHat 9.4 (RedHat family, dnf)"
LOCK = "redhat-release-0:9.4-0.5.el9.*\n"


def _one_rhel_vm(tmp_path: Path) -> Any:
    def edit(data: dict[str, Any]) -> None:
        data["vms"] = data["vms"][:1]
        data["guest"]["os"] = "rhel-9"
        data["storage"]["nfs"]["export"] = str(tmp_path / "export")
        data["storage"]["nfs"]["mount_point"] = str(tmp_path / "mnt-data")

    (tmp_path / "export").mkdir()
    return edit


def _ssh(lab: Any, address: str, command: str) -> subprocess.CompletedProcess[str]:
    key = str(lab.spec.guest.ssh.key_file)
    return subprocess.run(
        ["ssh", "-i", key, "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
         "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
         "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=5", f"root@{address}", command],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def _answers(lab: Any, address: str, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _ssh(lab, address, "true").returncode == 0:
            return True
        time.sleep(0.5)
    return False


def test_a_rhel9_lab_vm_is_a_stand_in_from_its_first_boot(rack_twin, capsys, tmp_path):
    from provision.apply import wait_task

    lab = rack_twin("inventories/lab.yaml", wait_for=None, guests=True, edit=_one_rhel_vm(tmp_path))
    (node,) = lab.spec.vms
    address = str(node.address)
    code, out, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err + out
    assert _answers(lab, address), lab.agent.events
    assert (node.name, "rhel-9 stand-in (Debian 12 underneath)") in lab.agent.events

    # Over SSH: RHEL 9's identity, no Debian one, rpm's own database and dnf that reads it.
    seen = _ssh(
        lab, address,
        "cat /etc/redhat-release; . /etc/os-release; echo $ID $VERSION_ID $PLATFORM_ID;"
        " test -e /etc/debian_version && echo debian_version;"
        " rpm -q redhat-release; rpm -q --whatprovides 'system-release(releasever)';"
        " dnf -q --disablerepo='*' list --installed redhat-release | tail -n 1",
    )  # fmt: skip
    assert seen.returncode == 0, seen.stderr
    lines = seen.stdout.splitlines()
    assert lines[:4] == [
        "Red Hat Enterprise Linux release 9.4 (Plow)",
        "rhel 9.4 platform:el9",
        "redhat-release-9.4-0.5.el9.x86_64",
        "redhat-release-9.4-0.5.el9.x86_64",
    ], seen.stdout
    assert lines[4].split()[:2] == ["redhat-release.x86_64", "9.4-0.5.el9"], seen.stdout
    assert "Unable to detect release version" not in seen.stderr, seen.stderr

    # Configure's own facts path (Ansible's gathered facts): printed and recorded as found.
    code, out, err = cli(lab, capsys, "configure", str(lab.spec_path), "--check",
                         "--tags", "mlx_ats")  # fmt: skip
    assert code == 0, err + out
    assert f"{node.name}: found {FOUND}" in out, out
    record = last_record(lab, "configure")
    assert record["data"]["hosts"][node.name]["outcomes"]["rackcert_facts_versions"]["os"] == FOUND

    # A power cycle: the same disk, so the same family and what was written to it since.
    lock = _ssh(lab, address, f"printf '{LOCK}' >> /etc/dnf/plugins/versionlock.list")
    assert lock.returncode == 0, lock.stderr
    with lab.connect() as si:
        wait_task(vm_named(si, node.name).PowerOffVM_Task(), "power off")
    assert lab.agent.wait_for(set(), timeout=30), lab.agent.events
    with lab.connect() as si:
        wait_task(vm_named(si, node.name).PowerOnVM_Task(), "power on")
    assert lab.agent.wait_for({node.name}, timeout=60), lab.agent.events
    assert _answers(lab, address), lab.agent.events
    again = _ssh(lab, address, "cat /etc/dnf/plugins/versionlock.list; rpm -qa")
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == [LOCK.strip(), "redhat-release-9.4-0.5.el9.x86_64"]
