"""The twin is a vCenter/ESXi 7.0.3: the API version it advertises, and 7.0-only behaviour."""

from __future__ import annotations

from provision.discovery import discover
from tests.support.vsphere_helpers import cli, last_record, plan_json, read_hosts

LAB = "inventories/lab.yaml"


def test_twin_advertises_703_and_pyvmomi_speaks_it(rack_twin):
    lab = rack_twin(LAB)
    with lab.connect() as si:
        about = si.content.about
        assert (about.version, about.apiVersion) == ("7.0.3", "7.0.3.0")
        assert si._stub.versionId.strip('"') == "urn:vim25/7.0.3.0"  # negotiated namespace
        inv = discover(si)
    assert inv.vcenter == "VMware vCenter Server 7.0.3 build-19234570"
    assert inv.api_version == "7.0.3.0"
    host = inv.hosts[0]
    seen = (host.esxi_version, host.esxi_build, host.api_version)
    assert seen == ("7.0.3", "19193900", "7.0.3.0")
    # a 7.0-only property travelled: HostCapability.deviceRebindWithoutRebootSupported
    assert host.rebind_without_reboot is False and host.boot_time is not None


def test_passthrough_applies_at_once_where_the_host_can_rebind(rack_twin, capsys):
    # ATS already on and devices rebindable: nothing needs a reboot.
    lab = rack_twin(LAB, host_desc={"*": {"rebind_without_reboot": True, "ats": True}}, guests=True)
    actions = plan_json(lab, capsys)["actions"]
    kinds = [a["kind"] for a in actions if a["kind"].startswith("host.")]
    assert kinds == ["host.passthrough", "host.passthrough"]
    assert all("applies at once" in a["reason"] for a in actions if a["kind"] == "host.passthrough")
    before = read_hosts(lab)
    code, _, err = cli(lab, capsys, "provision", str(lab.spec_path), "--yes")
    assert code == 0, err
    after = read_hosts(lab)
    for name, host in after.items():
        assert host["boot"] == before[name]["boot"], f"{name} was rebooted for nothing"
        assert host["active"] == ["0000:17:00.0", "0000:31:00.0"]
    assert last_record(lab, "provision")["status"] == "ok"
    assert plan_json(lab, capsys)["actions"] == []


def test_reboot_reason_names_only_what_needs_it(rack_twin, capsys):
    lab = rack_twin(LAB, host_desc={"*": {"rebind_without_reboot": True}})
    reboots = [a for a in plan_json(lab, capsys)["actions"] if a["kind"] == "host.reboot"]
    assert len(reboots) == 2
    assert all(r["reason"] == "ATS: in effect only after a reboot" for r in reboots)
    assert all(r["params"]["passthrough"] == [] for r in reboots)
