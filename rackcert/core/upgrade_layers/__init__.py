"""The upgrade layers, each one declaration (declaration.py says what a layer names), and
their registry: rackcert's own two are registered here, host image then guest; another
package registers its own with `register`.
"""

from rackcert.core.upgrade_layers.declaration import (
    ASK,
    DRAIN,
    FRAME,
    MEASURE,
    NODE_ENDS,
    NODE_POWERED_ON,
    NODE_VALIDATING,
    POWER_ON,
    RESUME,
    SHUTDOWN,
    VALIDATE,
    WAIT_DRAINED,
    Change,
    Layer,
    Side,
    Step,
    StepContext,
    diff,
    guest_tags,
    host_states,
    layer,
    layer_names,
    layers,
    node_states,
    out_of_service_states,
    register,
    registered,
    step_proofs,
    unregister,
    window_states,
)
from rackcert.core.upgrade_layers.guest import GUEST
from rackcert.core.upgrade_layers.host_image import HOST_IMAGE

register(HOST_IMAGE)
register(GUEST)

__all__ = [
    "ASK",
    "DRAIN",
    "FRAME",
    "GUEST",
    "HOST_IMAGE",
    "MEASURE",
    "NODE_ENDS",
    "NODE_POWERED_ON",
    "NODE_VALIDATING",
    "POWER_ON",
    "RESUME",
    "SHUTDOWN",
    "VALIDATE",
    "WAIT_DRAINED",
    "Change",
    "Layer",
    "Side",
    "Step",
    "StepContext",
    "diff",
    "guest_tags",
    "host_states",
    "layer",
    "layer_names",
    "layers",
    "node_states",
    "out_of_service_states",
    "register",
    "registered",
    "step_proofs",
    "unregister",
    "window_states",
]
