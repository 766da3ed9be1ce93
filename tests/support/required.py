"""What set-up installs, a test requires: missing, the test fails and names the set-up step.

Why: `pytest.importorskip` turns a broken set-up into a skip, and a skip in `-q` output reads
as green; the same missing Horovod failed test_bench_horovod and skipped
test_bench_start_sync. Everything the suite needs is installed by .ci/setup (Horovod by its
own step), so a module that does not import is a failed set-up, reported as a failure.
tests/unit/test_required.py keeps `importorskip` out of the suite.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

# The set-up step that installs each top-level package the tests import this way.
SETUP_STEP = {"horovod": ".ci/setup.d/40-horovod.sh", "torch": ".ci/setup (the DL extra)"}


def require(module: str) -> ModuleType:
    """The imported module, or the test fails naming the set-up step that should have
    installed it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        step = SETUP_STEP.get(module.split(".")[0], ".ci/setup")
        pytest.fail(f"{module} does not import ({exc}): set-up installs it, see {step}")
