"""Rehearse on a copy of the real vCenter first: capture, a twin from it, provision there.

The "real" vCenter of these tests is a twin too (the only vCenter a test can have); the
rehearsal's twin is a second one, started from the capture. Each test checks that the
real one is left as it was: the same capture before and after, and its state file
byte for byte.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rackcert.core.capture.model import comparable, load_capture
from rackcert.core.paths import REPO_ROOT
from rackcert.core.runs import RunDir
from rackcert.core.spec_loader import load_spec
from rackcert.lab import twin
from tests.support.rehearse import capture_cli as _capture
from tests.support.rehearse import round_trip as _round_trip
from tests.support.vsphere_helpers import cli, error_line

LAB = "inventories/lab.yaml"
ESX1 = "lab-esx01.lab.internal"
ESX2 = "lab-esx02.lab.internal"


def _untouched(lab: Any) -> dict[str, Any]:
    """What must not change on the real vCenter: its state file and a capture of it."""
    from provision.capture import capture

    with lab.connect() as si:
        taken, _ = capture(si)
    state = lab.twin.files.workdir / "twin-state.json"
    return {"capture": comparable(taken), "state": state.read_bytes()}


def _rehearsal(lab: Any) -> dict[str, Any]:
    paths = sorted(lab.runs_dir.glob("*/*/rehearsal.json"))
    assert paths, "no rehearsal.json"
    return json.loads(paths[-1].read_text())["data"]


def test_rehearse_the_lab_then_provision_what_was_rehearsed(rack_twin, capsys):
    lab = rack_twin(LAB, guests=True)
    before = _untouched(lab)
    code, out, err = cli(lab, capsys, "rehearse", str(lab.spec_path))
    assert code == 0, err
    data = _rehearsal(lab)
    kinds = [a["kind"] for a in data["actions"]]
    assert kinds.count("host.reboot") == 2 and kinds.count("vm.power_on") == 2
    assert len(data["done"]) == len(data["actions"]) and data["refusals"] == []
    assert data["second_plan"] == []
    assert any("wait(s) for a guest skipped" in n for n in data["notes"])
    assert "vm.wait" not in kinds
    # the twin served the capture as read: the same digest of what provision reads
    assert data["twin_digest"] == data["capture"]["inventory_digest"]
    assert set(data["seconds"]) >= {"capture", "twin_start", "plan", "apply", "readback", "total"}
    line = f"rehearsed on a capture taken at {data['capture']['taken_at']}: 12 actions, 0 refusals"
    assert line in out
    run = next(lab.runs_dir.glob("*/*/rehearsal.json")).parent
    kept = run / data["capture"]["file"]
    assert load_capture(kept).inventory_digest == data["capture"]["inventory_digest"]
    assert _untouched(lab) == before  # nothing touched the real vCenter

    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--rehearsed", str(run), "-y")
    assert code == 0, err
    assert (run / "provision.json").is_file()  # the real provision joins its rehearsal's run
    from rackcert.report.assemble import assemble

    assert assemble(RunDir.open(run)).rehearsal == line
    recorded = (run / "provision.json").read_bytes()
    # the rack changed since: the rehearsal no longer speaks for it
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--rehearsed", str(run), "-y")
    assert code == 2
    assert "provision refused: vCenter is not the inventory rehearsed in" in error_line(err)
    assert (run / "provision.json").read_bytes() == recorded  # nothing recorded lost


def _held_gpu(lab_spec: str) -> dict[str, Any]:
    """host_desc: lab-esx01's first GPU already active for passthrough (an earlier user)."""
    spec = load_spec(REPO_ROOT / lab_spec).spec
    pci = twin.pci_devices(spec.profile(spec.hosts[0].profile))
    for dev in pci:
        if dev["id"] == "0000:17:00.0":
            dev["passthru_enabled"] = dev["passthru_active"] = True
    return {ESX1: {"pci": pci}}


def _run_intruder(lab: Any) -> None:
    """A VM outside the spec, running, holding the GPU lab-node1 is to get."""
    from pyVmomi import vim

    from provision.apply import wait_task
    from tests.support.vsphere_poweron import find as _find
    from tests.support.vsphere_poweron import make_intruder as _intruder

    with lab.connect() as si:
        host = _find(si, vim.HostSystem, ESX1)
        target = host.parent.environmentBrowser.QueryConfigTarget(host=host)
        system_id = next(
            p.systemId for p in target.pciPassthrough if p.pciDevice.id.endswith("17:00.0")
        )
        wait_task(_intruder(si, system_id).PowerOnVM_Task(), "power on intruder")


def _no_template_disk(capture: dict[str, Any]) -> None:
    template = next(v for v in capture["vms"] if v["template"])
    template["devices"] = [d for d in template["devices"] if d["kind"] != "disk"]


PLANTED = {
    # name: (host_desc of the real vCenter, what to do to it, edit of the capture, refusal)
    "gpu held by a running VM outside the spec": (
        _held_gpu(LAB),
        _run_intruder,
        None,
        ("lab-node1", "shares passthrough device 0000:17:00.0 with intruder"),
    ),
    "template without a disk": (
        None,
        None,
        _no_template_disk,
        ("plan", "has no disk: a clone could not boot"),
    ),
    "host in an operator's maintenance mode": (
        {ESX1: {"maintenance": True}},
        None,
        None,
        ("lab-node1", f"{ESX1} is in maintenance mode"),
    ),
    "ESXi build without the ATS option": (
        {ESX2: {"ats_option": False}},
        None,
        None,
        (ESX2, "no VMkernel.Boot.atsSupport"),
    ),
}


@pytest.mark.parametrize("case", list(PLANTED))
def test_rehearsal_catches_refusals_planted_in_a_capture(rack_twin, capsys, tmp_path, case):
    host_desc, prepare, edit, (target, words) = PLANTED[case]
    lab = rack_twin(LAB, host_desc=host_desc)
    if prepare is not None:
        prepare(lab)
    before = _untouched(lab)
    args = ["rehearse", str(lab.spec_path)]
    if edit is not None:
        planted = _capture(lab, capsys, tmp_path / "capture.json")
        edit(planted)
        (tmp_path / "capture.json").write_text(json.dumps(planted))
        args += ["--capture", str(tmp_path / "capture.json")]
    code, out, err = cli(lab, capsys, *args)
    assert code == 1, err
    refusals = _rehearsal(lab)["refusals"]
    assert any(r["target"] == target and words in r["message"] for r in refusals), refusals
    assert f"{len(refusals)} refusals" in out and words in out
    assert _untouched(lab) == before  # the real vCenter: same inventory, same state file
    if case == "host in an operator's maintenance mode":  # the rest went on after the refusal
        done = {(a["kind"], a["target"]) for a in _rehearsal(lab)["done"]}
        assert ("vm.power_on", "lab-node2") in done and ("vm.power_on", "lab-node1") not in done


def test_capture_round_trip_on_the_r750xa_twin(rack_twin, capsys, tmp_path):
    lab = rack_twin(guests=True)  # inventories/r750xa-4node.yaml
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err
    first = _round_trip(capsys, tmp_path, lab)
    # provisioned: VMs with fixed passthrough backings whose systemId the replay holds
    fixed = [
        d
        for v in first["vms"]
        for d in v["devices"]
        if d["kind"] == "pci_passthrough" and d["backing"] == "fixed"
    ]
    assert fixed and all(d["system_id"] for d in fixed)
    # the instance UUIDs provision gave its clones, captured and served back (_round_trip)
    from provision.vm_identity import instance_uuid

    rack = lab.spec.metadata.name
    uuids = {v["name"]: v["instance_uuid"] for v in first["vms"]}
    assert {v.name: uuids[v.name] for v in lab.spec.vms} == {
        v.name: instance_uuid(rack, v.name) for v in lab.spec.vms
    }
    hosts = {h["name"]: h for h in first["hosts"]}
    assert all(h["passthrough_system_id"] for h in hosts.values())
    assert {h["hardware"]["model"] for h in hosts.values()} == {"PowerEdge R750xa"}
    # The facts a capture shares with discovery (HostState, VmConfig) come from discovery's
    # one reading of the same answer, whole: state, boot time, placement, sizes.
    for h in hosts.values():
        assert h["connection_state"] == "connected" and h["power_state"] == "poweredOn", h
        assert h["boot_time"] and h["datastores"] and h["networks"], h
    for v in (v for v in first["vms"] if v["name"] in {vm.name for vm in lab.spec.vms}):
        assert v["power_state"] == "poweredOn" and v["host"] in hosts, v
        assert v["num_cpus"] > 0 and v["memory_mb"] > 0 and v["firmware"] == "efi", v
        assert v["memory_reservation_locked"] and v["hardware_version"].startswith("vmx-"), v
    import jsonschema

    schema = json.loads((REPO_ROOT / "schemas" / "capture.schema.json").read_text())
    jsonschema.validate(first, schema)


def test_capture_round_trip_on_a_64_host_twin(rack_twin, capsys, tmp_path):
    lab = rack_twin(hosts=64)
    first = _round_trip(capsys, tmp_path, lab)
    assert len(first["hosts"]) == 64 and len([v for v in first["vms"] if not v["template"]]) > 64


def test_a_capture_holds_no_secret_and_anonymize_is_consistent(rack_twin, capsys, tmp_path):
    from pyVmomi import vim

    from provision.apply import wait_task
    from provision.guestinfo import USERDATA, guestinfo, read_authorized_keys
    from rackcert.core.capture.anonymize import aliases
    from tests.support.vsphere_poweron import find as _find

    lab = rack_twin(LAB, guests=True)
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err
    with lab.connect() as si:  # a site keeps a credential in a VM's extraConfig
        vm = _find(si, vim.VirtualMachine, "lab-node2")
        extra = [vim.option.OptionValue(key="site.db.password", value="hunter2-db-secret")]
        wait_task(vm.ReconfigVM_Task(spec=vim.vm.ConfigSpec(extraConfig=extra)), "extra")
    plain = _capture(lab, capsys, tmp_path / "plain.json")
    text = (tmp_path / "plain.json").read_text()
    password = Path(lab.spec.vcenter.password_file or "").read_text().strip()
    key_file = Path(lab.spec.guest.ssh.key_file or "").expanduser()
    private = [line for line in key_file.read_text().splitlines() if "PRIVATE" not in line]
    public = key_file.with_name(key_file.name + ".pub").read_text().split()[1]
    written = guestinfo(lab.spec, lab.spec.vms[0], read_authorized_keys(lab.spec))[USERDATA]
    for secret in [password, public, written, "hunter2-db-secret", *private]:
        assert secret not in text
    node2 = next(v for v in plain["vms"] if v["name"] == "lab-node2")
    withheld = {e["key"] for e in node2["extra_config"] if e["redacted"]}
    assert {"site.db.password", USERDATA} <= withheld
    assert "pciPassthru.allowP2P" not in withheld  # settings stay readable

    anon = _capture(lab, capsys, tmp_path / "anon.json", "--anonymize")
    anon_text = (tmp_path / "anon.json").read_text()
    names = aliases(load_capture(tmp_path / "plain.json"))
    assert {"lab-node1", ESX1, "lab-ds", "lab-mgmt", "debian-12-cloudinit"} <= set(names)
    for original in names:
        assert original not in anon_text, original
    for address in ("10.77.0.11", "10.77.0.12"):
        assert address not in anon_text
    assert anon["anonymized"] is True
    assert all(v["instance_uuid"] for v in plain["vms"])
    assert {v["instance_uuid"] for v in anon["vms"]} == {""}  # uuid5 of the real names
    # the same original maps to the same alias everywhere
    assert {(names[v["name"]], names[v["host"]]) for v in plain["vms"]} == {
        (v["name"], v["host"]) for v in anon["vms"]
    }
    for plain_c, anon_c in zip(plain["clusters"], anon["clusters"], strict=True):
        assert sorted(names[h] for h in plain_c["hosts"]) == anon_c["hosts"]
    for host in anon["hosts"]:
        assert set(host["datastores"]) <= {d["name"] for d in anon["datastores"]}
    assert {h["name"] for h in anon["hosts"]} == {"host-01", "host-02"}
    assert anon["inventory_digest"] == plain["inventory_digest"]


def test_lab_up_capture_serves_it_and_names_what_is_static(rack_twin, capsys, tmp_path):
    import yaml

    from rackcert.cli import main

    lab = rack_twin(LAB)
    planted = _capture(lab, capsys, tmp_path / "capture.json")
    planted["datastores"][0]["type"] = "vsan"
    planted["networks"][0]["type"] = "DistributedVirtualPortgroup"
    planted["clusters"][0]["rules"] = [
        {"name": "keep-apart", "type": "ClusterAntiAffinityRuleSpec", "enabled": True}
    ]
    planted["hosts"][0]["pci_devices"].append(
        {"id": "0000:e3:00.0", "class_id": 0x0108, "vendor_id": 0x144D, "device_id": 0xA80A}
    )
    (tmp_path / "capture.json").write_text(json.dumps(planted))
    data = yaml.safe_load(lab.spec_path.read_text())
    data["vcenter"].update(port=_free_port(), password_file=str(tmp_path / "lab" / "pw"))
    data["vcenter"]["tls"] = {"verify": True, "ca_file": str(tmp_path / "lab" / "vcsim-cert.pem")}
    spec = tmp_path / "lab.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    capsys.readouterr()
    try:
        up = ["lab", "up", str(spec), "--no-ssh-hosts", "--capture", str(tmp_path / "capture.json")]
        assert main(up) == 0
        out = capsys.readouterr().out
        static = [line for line in out.splitlines() if line.startswith("served as static data:")]
        for words in ("type vsan", "DistributedVirtualPortgroup", "1 DRS rule", "class 0x0108"):
            assert len([line for line in static if words in line]) == 1, (words, static)
        from provision.capture import capture
        from provision.session import connect

        with connect(load_spec(spec).spec) as si:
            served, _ = capture(si)
    finally:
        assert main(["lab", "down", str(spec), "--no-ssh-hosts"]) == 0
    assert served.datastores[0].type == "vsan"
    assert [(r.name, r.type) for r in served.clusters[0].rules] == [
        ("keep-apart", "ClusterAntiAffinityRuleSpec")
    ]
    assert served.hosts[0].pci_devices[-1].id == "0000:e3:00.0"
    assert {v.name for v in served.vms} == {v["name"] for v in planted["vms"]}


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_bad_input_is_one_line(rack_twin, capsys, tmp_path):
    lab = rack_twin(LAB)
    from rackcert.cli import main

    capsys.readouterr()
    assert main(["capture", str(lab.spec_path)]) == 2
    assert "-o FILE" in error_line(capsys.readouterr().err)
    bogus = tmp_path / "bogus.json"
    bogus.write_text('{"format": "something-else"}')
    code, _, err = cli(lab, capsys, "rehearse", str(lab.spec_path), "--capture", str(bogus))
    assert code == 2 and "not a rackcert capture" in error_line(err)
    code, _, err = cli(lab, capsys, "plan", str(lab.spec_path))
    assert code == 0, err
    run = next(lab.runs_dir.glob("*/*/plan.json")).parent
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--rehearsed", str(run), "-y")
    assert code == 2 and "no rehearsal with a capture recorded there" in error_line(err)
    assert not (run / "provision.json").exists()


def test_bootstrap_rehearse_runs_the_rehearsal_first_and_stops_on_a_refusal(rack_twin):
    from rackcert.cli.bootstrap_cmds import build_stages
    from rackcert.pipeline import run_pipeline

    for host_desc, ok in ((None, True), ({ESX2: {"ats_option": False}}, False)):
        lab = rack_twin(LAB, host_desc=host_desc, guests=ok)  # ok: provision waits for them
        loaded = load_spec(lab.spec_path)
        stages, _report = build_stages(
            loaded,
            yes=True,
            power_cycle=False,
            quick=True,
            local_bench=True,
            runs_root=lab.runs_dir,
            rehearse=True,
        )
        assert [s.name for s in stages][:3] == ["rehearsal", "plan", "provision"]
        run = RunDir.create(lab.runs_dir, "lab", loaded.sha256, loaded.text)
        result = run_pipeline(stages[:3], run)
        assert (run.path / "rehearsal.json").is_file()
        if ok:
            assert result.ok, result.error
            assert (run.path / "provision.json").is_file()
        else:  # nothing touched the real hosts
            assert result.failed == "rehearsal" and "1 refusals" in str(result.error)
            assert not (run.path / "provision.json").exists()
