"""The certified matrix's BIOS and NIC firmware rows are observed, not "unknown"."""

from __future__ import annotations

from tests.support.firmware_rows import ETHTOOL
from validation.nic_firmware import parse_nic_firmware

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
