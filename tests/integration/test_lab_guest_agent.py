"""VMs that boot and join: the twin's clones become SSH hosts, and only those that run.

Real twin, real pyVmomi, real SSH hosts: provision clones the template,
customizes and powers on the VMs; the lab's guest agent sees the power-on
through WaitForUpdatesEx, decodes the VM's guestinfo like cloud-init and brings
up a host with that hostname, address and key. Power-off takes it down.
"""

from __future__ import annotations

import subprocess

from provision.lifecycle import ssh_answers
from tests.support.vsphere_helpers import (
    cli,
    error_line,
    last_record,
    plan_json,
    read_vms,
    vm_named,
)


def _ssh(spec, address, command, key=None):
    key = key or spec.guest.ssh.key_file
    return subprocess.run(
        ["ssh", "-i", key, "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
         "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
         "-o", "ConnectTimeout=5", f"root@{address}", command],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip


def test_hosts_are_born_from_powered_on_vms_and_die_with_them(agent_lab, capsys):
    lab = agent_lab()
    node1, node2 = lab.spec.vms
    assert not ssh_answers(node1.address, 22) and not ssh_answers(node2.address, 22)
    assert lab.agent.guests == {}

    code, out, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err
    done = last_record(lab, "provision")["data"]["done"]
    # Each VM's chain in its order (the two chains run side by side: provision's VM lanes).
    chains = {vm.name: [a["kind"] for a in done if a["target"] == vm.name] for vm in (node1, node2)}
    chain = ["vm.clone", "vm.customize", "vm.power_on", "vm.wait"]
    assert chains == {node1.name: chain, node2.name: chain}, chains
    record = last_record(lab, "provision")
    states = record["data"]["vms"]
    for vm in (node1, node2):
        assert states[vm.name]["answered"] == "ssh", states
        assert states[vm.name]["power_state"] == "poweredOn"
    assert set(lab.agent.guests) == {"lab-node1", "lab-node2"}
    # The host is what cloud-init made of guestinfo: hostname, address, the spec's key only.
    answer = _ssh(
        lab.spec, node1.address, "hostname; ip -4 -o addr show eth0; getent hosts lab-node2"
    )
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.splitlines()[0] == "lab-node1"
    assert f"{node1.address}/24" in answer.stdout
    assert answer.stdout.splitlines()[-1].split() == [node2.address, "lab-node2"]  # lab DNS
    agent_key = lab.agent.guests["lab-node1"].host.key_file
    assert _ssh(lab.spec, node1.address, "true", key=str(agent_key)).returncode != 0

    # Re-running provision changes nothing.
    assert plan_json(lab, capsys)["actions"] == []
    code, out, _ = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0 and "nothing to do" in out

    # Power-off through the vSphere API: the host goes down, the other one stays.
    from provision.apply import wait_task

    with lab.connect() as si:
        wait_task(vm_named(si, "lab-node2").PowerOffVM_Task(), "power off")
    assert lab.agent.wait_for({"lab-node1"}, timeout=30), lab.agent.events
    assert not ssh_answers(node2.address, 22)
    assert ssh_answers(node1.address, 22)
    # The next plan powers it on again and waits for it.
    kinds = [(a["kind"], a["target"]) for a in plan_json(lab, capsys)["actions"]]
    assert kinds == [("vm.power_on", "lab-node2"), ("vm.wait", "lab-node2")]

    with lab.connect() as si:
        wait_task(vm_named(si, "lab-node1").PowerOffVM_Task(), "power off")
        wait_task(vm_named(si, "lab-node1").Destroy_Task(), "destroy")
    assert lab.agent.wait_for(set(), timeout=30), lab.agent.events


def test_a_vm_never_powered_on_has_no_host(agent_lab, capsys):
    injected = "injected: lab-node2 power-on refused"
    lab = agent_lab(
        faults={
            "fail": [
                {"method": "PowerOnVM_Task", "target": "lab-node2", "count": 1, "message": injected}
            ]
        }
    )
    # And node1's lab host fails to start once (as under load): the agent starts it again.
    lab.agent.fail_starts["lab-node1"] = 1
    node1, node2 = lab.spec.vms
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 1 and injected in error_line(err)
    story = [what for vm, what in lab.agent.events if vm == "lab-node1"]
    assert story[:2] == ["host failed: injected: the host of lab-node1 did not start", "up"], story
    vms = read_vms(lab)
    assert vms["lab-node2"]["power"] == "poweredOff"
    assert vms["lab-node2"]["extra"]["guestinfo.metadata"]  # customized: it only never ran
    assert lab.agent.wait_for({"lab-node1"}, timeout=30), lab.agent.events
    assert ssh_answers(node1.address, 22)
    assert not ssh_answers(node2.address, 22)
    assert "lab-node2" not in lab.agent.guests


def test_missing_template_is_one_line_and_creates_nothing(rack_twin, capsys):
    lab = rack_twin("inventories/lab.yaml", templates=[])
    for args in (["plan"], ["provision", "--yes"]):
        code, _, err = cli(lab, capsys, args[0], str(lab.spec_path), *args[1:])
        assert code == 2
        line = error_line(err)
        assert "'debian-12-cloudinit' is not in vCenter" in line and "nothing was changed" in line
    assert read_vms(lab) == {}
    assert last_record(lab, "provision")["status"] == "failed"


def test_bios_template_is_refused_at_plan_time(rack_twin, capsys):
    from rackcert.core.spec_loader import load_spec
    from rackcert.lab import twin as lab_twin

    spec = load_spec("inventories/lab.yaml").spec
    lab = rack_twin(
        "inventories/lab.yaml", templates=lab_twin.site_templates(spec, firmware="bios")
    )
    code, _, err = cli(lab, capsys, "plan", str(lab.spec_path))
    assert code == 2
    line = error_line(err)
    assert "boots with bios firmware" in line and "EFI" in line
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 2 and "bios" in error_line(err)
    assert read_vms(lab) == {}


def test_existing_vm_without_a_disk_is_blocked_with_the_reason(rack_twin, capsys):
    shell = {"name": "lab-node1", "host": "lab-esx01.lab.internal", "cpus": 8, "memory_mb": 16384}
    lab = rack_twin("inventories/lab.yaml", vms=[shell], guests=True)
    actions = plan_json(lab, capsys)["actions"]
    disk = next(a for a in actions if a["target"] == "lab-node1")
    assert disk["kind"] == "vm.disk" and disk["blocked"] == "VM has no disk"
    assert "cannot boot" in disk["reason"]
    assert [a["kind"] for a in actions if a["target"] == "lab-node1"] == ["vm.disk"]
    assert ("vm.clone", "lab-node2") in [(a["kind"], a["target"]) for a in actions]
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 1 and "lab-node1: VM has no disk" in error_line(err)
    vms = read_vms(lab)
    assert vms["lab-node1"]["disks_gb"] == [] and vms["lab-node1"]["power"] == "poweredOff"
    assert vms["lab-node2"]["power"] == "poweredOn"
