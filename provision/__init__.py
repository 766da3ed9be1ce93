"""The vSphere layer: session, discovery, planner and apply, through pyVmomi.

`provision` never imports `validation` (and the other way round); both read the
spine (`rackcert.*`). pyVmomi is imported inside functions so that the CLI stays
fast and works where pyVmomi is not installed.
"""

from provision.stage import run, run_plan

__all__ = ["run", "run_plan"]
