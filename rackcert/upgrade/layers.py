"""Which layers an upgrade changes: the new spec against the last certified run's spec.

The layers are declared once in the spine (rackcert.core.upgrade_layers: rackcert's host
image and guest layers, and any registered from outside); this module is the upgrade
stage's name for them. Anything else that differs (hosts, VMs, templates) is not an
upgrade but a re-provision, and is refused by refusals.py.

    changes = diff(certified_spec, new_spec)
"""

from __future__ import annotations

from rackcert.core.upgrade_layers import Change, Layer, diff, layer, layers
from rackcert.core.upgrade_layers.guest import GUEST_COMPONENTS, guest_versions, uses_vgpu
from rackcert.core.upgrade_layers.host_image import ESXI, VGPU_MANAGER, host_versions

__all__ = [
    "ESXI",
    "GUEST_COMPONENTS",
    "VGPU_MANAGER",
    "Change",
    "Layer",
    "diff",
    "guest_versions",
    "host_versions",
    "layer",
    "layers",
    "uses_vgpu",
]
