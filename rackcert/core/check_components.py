"""Which component's version each check observes: one table for validate, the report and the roll.

Why one: validate records a node's versions from its checks' observations (validate.json's
`nodes[].versions`), the report's software matrix reads the same observations when no fact
carried a version, and the roll's judge compares the versions validate recorded with the
ones the new spec wants. Two tables of the same names drift (validate's had 7 entries and the
report's 8, one naming a check that does not exist); this is the only one. Its keys are check
ids (validation/checks, `@check("gpu.driver", ...)`), its values the component names of the
spec's guest block, the certified matrix and the report (`nvidia_driver`, `cuda`, ...).

    CHECK_COMPONENTS["gpu.driver"]   # -> "nvidia_driver"
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

CHECK_COMPONENTS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "gpu.driver": "nvidia_driver",
        "gpu.cuda.toolkit": "cuda",
        "gpu.cuda.driver": "cuda_driver",
        "gpu.model": "gpu_model",
        "ofed.version": "ofed",
        "container.toolkit": "container_toolkit",
        "os.release": "os",
    }
)
