"""Whether the lab is up: its VMs' addresses must be routed by the lab's own bridge.

The lab's VMs live on a /24 (10.77.0.0/24) that exists only while the lab's bridge does.
With the lab down, the kernel routes those addresses like any other, through the default
gateway: a command on the lab spec then opened SSH connections to whatever answers at
10.77.0.x on the outside network. So commands that reach the VMs ask the kernel first
(`ip -4 route get ADDRESS`) and refuse unless the route's device is the bridge of the
address's /24 (`rackcert.lab.sshhosts.network.bridge_name`).

Example:
    require_lab_up(loaded.spec)   # InputError "the lab is not up: rackcert lab up" (exit 2)
"""

from __future__ import annotations

import ipaddress
from typing import Any

from rackcert.core.errors import InputError
from rackcert.lab.sshhosts.network import bridge_name, route_device

LAB_RACK = "lab"  # metadata.name of the lab spec (inventories/lab.yaml) and of its test copies


def bridge_routes(address: str) -> bool:
    """True when `address` is routed through the bridge that owns its /24 (a lab or test net)."""
    try:
        subnet = ipaddress.IPv4Network(f"{address}/24", strict=False)
    except ValueError:
        return False
    return route_device(address) == bridge_name(str(subnet))


def require_lab_up(spec: Any) -> None:
    """On the lab spec, refuse (exit 2) unless every VM address is routed by the lab's bridge."""
    if spec.metadata.name != LAB_RACK:
        return
    for vm in spec.vms:
        if not bridge_routes(str(vm.address)):
            raise InputError(
                f"the lab is not up: rackcert lab up (then provision; {vm.name} at {vm.address}"
                " is not routed through the lab's bridge; nothing was sent to it)"
            )
