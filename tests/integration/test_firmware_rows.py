"""The certified matrix's BIOS and NIC firmware rows are observed, not "unknown"."""

from __future__ import annotations

from provision.discovery import discover
from rackcert.core.observed import Inventory
from rackcert.report.assemble import _hardware
from rackcert.report.matrix import compare, find_reference
from rackcert.report.software import versions_from_facts
from tests.support.firmware_rows import ETHTOOL
from validation.nic_firmware import _COMMAND, parse_nic_firmware


def test_the_probe_runs_on_a_real_host_and_finds_no_firmware_on_virtual_nics(ssh_hosts, tmp_path):
    (host,) = ssh_hosts(["node1"])
    out = host.ssh(_COMMAND)
    assert out.returncode == 0, out.stderr
    assert parse_nic_firmware(out.stdout.splitlines()) == {"version": "", "devices": {}}
    # ...and as one of the facts validate's probe session gathers (facts.json).
    from rackcert.core.ssh_target import SshTarget
    from validation.checks import NodeView
    from validation.expect import NodeExpect
    from validation.facts.net import NicFirmware
    from validation.gather import Target, gather
    from validation.snapshot import build_facts

    ssh = SshTarget(
        host=host.address,
        port=host.port,
        identity_file=str(host.key_file),
        known_hosts=str(host.known_hosts),
    )
    target = Target(expect=NodeExpect(node="node1", address=host.address), ssh=ssh)
    got = gather(target, [NicFirmware], None)
    assert got.reachable, got.error
    view = NodeView(target.expect, got.outputs)
    doc = build_facts({"node1": view}, {}, facts=[NicFirmware], seconds=got.seconds)
    node = doc["nodes"]["node1"]
    assert doc["facts"] == ["nic_firmware"]  # exactly the facts gathered
    assert "nic_firmware" not in node.get("fact_errors", {}), node.get("fact_errors")
    assert node["nic_firmware"] == {"version": "", "devices": {}}


def test_bios_from_discovery_and_nic_firmware_from_facts_fill_the_matrix(rack_twin):
    lab = rack_twin("inventories/r750xa-4node.yaml", guests=True)
    with lab.connect() as si:
        inv = discover(si)
    host = inv.host("esx01.example.internal")
    # The twin's hosts keep govmomi's simulated HostBIOSInfo (simulator/esx).
    assert host.model_extra["bios_version"] == "6.00"
    inv = Inventory.model_validate(inv.model_dump())  # as provision.json is read back
    facts = {"nic_firmware": parse_nic_firmware(ETHTOOL.splitlines())}
    software = {"node1": versions_from_facts(facts)}
    assert software["node1"]["nic_firmware"] == "22.31.1014"
    hardware, _ = _hardware(inv, "provision")
    ref = find_reference("dell-r750xa-a100-esxi703")
    rows = {r.component: r for r in compare(ref, hardware, software).rows}
    assert rows["bios_version"].status == "matches"  # 6.00 >= 1.1.3
    assert rows["bios_version"].observed["esx01.example.internal"] == "6.00"
    assert rows["nic_firmware"].status == "matches"  # 22.31 line
    assert rows["nic_firmware"].observed == {"node1": "22.31.1014"}
