"""`rackcert spec discover`: turn what vCenter (and the guests) report into a spec draft.

Pure steps, each in its own module, so each is tested on objects built in the test:
catalog (PCI ids and server models, data in catalog/*.yaml), hardware (one ObservedHost
-> GPUs, NICs, catalog NVLink pairs), inventory_to_spec (hosts -> spec dict and
comments), topo (`nvidia-smi topo -m` -> NVLink pairs on host PCI addresses),
yaml_writer (spec dict -> commented YAML), drift (spec in use vs. discovered hardware).
Only `nodes` (SSH to the VMs) and the CLI touch the outside world.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rackcert.discover.flow import Discovered, DiscoverRequest, LiveInventory, Say


def run(request: DiscoverRequest, live_inventory: LiveInventory, say: Say) -> Discovered:
    """The discover flow (rackcert/discover/flow.py): draft a spec from vCenter, diff it."""
    from rackcert.discover.flow import run as discover

    return discover(request, live_inventory, say)
