"""Racks of any size for the pace tests and benchmarks/provision_pace.py.

`rack_spec(path, hosts, vms_per_host)` writes a spec of the Dell R750xa design with
`hosts` hosts and `vms_per_host` VMs each: two 2-GPU NVLink VMs per host (each with a
ConnectX-6 port), or four 1-GPU VMs (management NIC only). Its twin is started like any
other (`rack_twin(path)`, or rackcert.lab.twin for the benchmark).
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import yaml

from rackcert.core.paths import REPO_ROOT

BASE = REPO_ROOT / "inventories" / "r750xa-4node.yaml"


def rack_data(hosts: int, vms_per_host: int, subnet: str = "10.10.0.0/16") -> dict[str, Any]:
    """The spec's data: hosts esx001.. and their VMs (2 NVLink pairs, or 4 single GPUs)."""
    if vms_per_host not in (1, 2, 4):
        raise ValueError("vms_per_host is 1, 2 or 4 (the R750xa has 4 GPUs)")
    data = yaml.safe_load(BASE.read_text())
    data["metadata"]["name"] = f"pace-{hosts}x{vms_per_host}"
    profile = data["hosts"][0]["profile"]
    data["hosts"] = [
        {
            "name": f"esx{i:03d}",
            "address": f"esx{i:03d}.example.internal",
            "profile": profile,
            "esxi_version": "7.0.3",
        }
        for i in range(1, hosts + 1)
    ]
    template = "dl-2gpu-nvlink" if vms_per_host <= 2 else "dl-1gpu-single-node"
    block = ipaddress.IPv4Network(subnet)
    vms = []
    for i in range(1, hosts + 1):
        for j in range(vms_per_host):
            vm: dict[str, Any] = {
                "name": f"node{i:03d}-{j}",
                "template": template,
                "host": f"esx{i:03d}",
                "address": str(block.network_address + 256 + len(vms) + 11),
            }
            if template == "dl-1gpu-single-node":
                vm["allow_split_pair"] = True
            vms.append(vm)
    data["vms"] = vms
    data["network"]["management"]["gateway"] = str(block.network_address + 1)
    data["network"]["management"]["prefix"] = block.prefixlen
    return data


def rack_spec(path: Path, hosts: int, vms_per_host: int) -> Path:
    """Write rack_data(...) as a spec file at `path` and return it."""
    path.write_text(yaml.safe_dump(rack_data(hosts, vms_per_host), sort_keys=False))
    return path
