"""A host reboot as vCenter shows it: accepted first, down for a while, back with a later boot."""

from __future__ import annotations

from tests.support.vsphere_helpers import cli, error_line, last_record, plan_json, read_hosts

LAB = "inventories/lab.yaml"


def test_provision_waits_for_a_later_boot_time_not_the_first_connected(rack_twin, capsys):
    # vCenter keeps the host "connected" 0.5 s after accepting the reboot, then 1.5 s
    # notResponding; calls to the host fault in between (old code exited maintenance
    # mode right away and failed on HostCommunication).
    lab = rack_twin(LAB, desc={"reboot": {"connected_ms": 500, "down_ms": 1500}}, guests=True)
    before = read_hosts(lab)
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err
    record = last_record(lab, "provision")
    reboots = [a for a in record["data"]["done"] if a["kind"] == "host.reboot"]
    assert reboots and all(a["result"].startswith("booted 20") for a in reboots)
    after = read_hosts(lab)
    for name, host in after.items():
        assert host["boot"] > before[name]["boot"]
        assert not host["maintenance"]
        # the passthrough view was refreshed: the enabled GPUs show as active there
        assert host["active"], name
    assert plan_json(lab, capsys)["actions"] == []


def test_a_host_that_does_not_come_back_fails_within_the_bound(rack_twin, capsys):
    lab = rack_twin(LAB, desc={"reboot": {"connected_ms": 100, "down_ms": 600000}})
    code, _, err = cli(
        lab, capsys, "provision", str(lab.spec_path), "--yes", "--reboot-timeout", "2"
    )
    assert code == 1
    line = error_line(err)
    assert "not back 2 s after the reboot" in line and "notResponding" in line
    record = last_record(lab, "provision")
    assert record["status"] == "failed"
    done = [a["kind"] for a in record["data"]["done"]]
    assert "host.passthrough" in done and "host.reboot" not in done
