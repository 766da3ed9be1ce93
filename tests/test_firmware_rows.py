"""The certified matrix's BIOS and NIC firmware rows are observed, not "unknown"."""

from __future__ import annotations

from provision.discovery import discover
from rackcert.core.observed import Inventory
from rackcert.report.assemble import _hardware
from rackcert.report.matrix import compare, find_reference
from rackcert.report.software import versions_from_facts
from validation.nic_firmware import _COMMAND, parse_nic_firmware

# `ethtool -i` as the Linux ethtool prints it (ethtool.c, dump_drvinfo: one "key: value"
# per line): a ConnectX-6 Dx port (firmware version, then the board's PSID) and a
# vmxnet3 management NIC, whose driver reports no firmware.
ETHTOOL = """\
## ethtool ens192
driver: vmxnet3
version: 1.5.0.0-k-NAPI
firmware-version:
expansion-rom-version:
bus-info: 0000:0b:00.0
supports-statistics: yes
## ethtool ens1f0np0
driver: mlx5_core
version: 5.4-3.1.0
firmware-version: 22.31.1014 (DEL0000000027)
expansion-rom-version:
bus-info: 0000:4b:00.0
supports-statistics: yes
"""

# `mlxfwmanager --query` (NVIDIA MFT user manual, "mlxfwmanager - Firmware Update and Query
# Tool": per device a block with "PCI Device Name" and a Versions table whose FW row
# holds the current version).
MLXFWMANAGER = """\
## mlxfwmanager
Querying Mellanox devices firmware ...

Device #1:
----------

  Device Type:      ConnectX6DX
  PSID:             DEL0000000027
  PCI Device Name:  0000:4b:00.0
  Versions:         Current        Available
     FW             22.31.1014     N/A
     PXE            3.6.0502       N/A

  Status:           No matching image found
"""

# `flint -d 0000:4b:00.0 query` (MFT manual, flint "query" command).
FLINT = """\
## flint 0000:4b:00.0
Image type:            FS4
FW Version:            22.32.2004
FW Release Date:       2.2.2022
PSID:                  DEL0000000027
"""


def test_ethtool_keeps_physical_nics_with_firmware_only():
    fw = parse_nic_firmware(ETHTOOL.splitlines())
    assert fw["version"] == "22.31.1014"
    assert list(fw["devices"]) == ["ens1f0np0"]
    assert fw["devices"]["ens1f0np0"] == {
        "source": "ethtool",
        "driver": "mlx5_core",
        "firmware": "22.31.1014 (DEL0000000027)",
        "pci": "0000:4b:00.0",
    }


def test_mft_tools_answer_where_no_netdev_does():
    fw = parse_nic_firmware((ETHTOOL + MLXFWMANAGER).splitlines())
    assert fw["devices"]["Device #1"] == {
        "source": "mlxfwmanager",
        "pci": "0000:4b:00.0",
        "firmware": "22.31.1014",
    }
    assert fw["version"] == "22.31.1014"
    mixed = parse_nic_firmware((ETHTOOL + FLINT).splitlines())
    assert mixed["version"] == "22.31.1014; 22.32.2004"  # each must hold in the matrix


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
