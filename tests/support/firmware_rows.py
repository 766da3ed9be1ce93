"""What more than one test module needs from the old test_firmware_rows.py:
tests/integration/test_firmware_rows.py, tests/unit/test_firmware_rows.py.
"""

from __future__ import annotations

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
