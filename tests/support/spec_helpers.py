"""Helpers for tests that need a spec: the shipped examples and broken copies of them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from rackcert.core.paths import inventories_dir

EXAMPLES = sorted(inventories_dir().glob("*.yaml"))
R750 = inventories_dir() / "r750xa-4node.yaml"
LAB = inventories_dir() / "lab.yaml"


def example_data(path: Path = R750) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def write_spec(tmp_path: Path, data: dict[str, Any], name: str = "spec.yaml") -> Path:
    target = tmp_path / name
    target.write_text(yaml.safe_dump(data, sort_keys=False))
    return target


def mutated(data: dict[str, Any], edit) -> dict[str, Any]:
    """A deep copy of `data` after `edit(copy)`; the original stays intact."""
    clone = copy.deepcopy(data)
    edit(clone)
    return clone


def gateway_on_subnet_of(data: dict[str, Any], address: str) -> None:
    """Point the management gateway into `address`'s /prefix, as a spec for those VMs must."""
    import ipaddress

    mgmt = data.get("network", {}).get("management")
    if mgmt is None:
        return
    net = ipaddress.ip_interface(f"{address}/{mgmt.get('prefix', 24)}").network
    mgmt["gateway"] = str(net.network_address + 1)
