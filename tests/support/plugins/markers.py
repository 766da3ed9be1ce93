"""Every test is `unit` or `integration`, and its folder says which.

tests/unit/: nothing is started (no process, no socket, no network namespace), and the unit
conftest's guard fails a test that tries (tests/support/unit_guard.py). tests/integration/:
everything that starts something (the vcsim twin, SSH test hosts in network namespaces,
ansible-runner and ansible-playbook, torchrun, Gloo or Horovod ranks, Slurm, a browser, PDF
rendering, the CLI as a process). A test of the wrong kind is moved to the other folder, never
marked by hand: `pytest -m unit` and `pytest -m integration` select by folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent.parent.parent
KINDS = ("unit", "integration")


def kind_of(path: Path) -> str | None:
    """'unit' or 'integration' for a test file under tests/unit/ or tests/integration/."""
    try:
        folder = path.resolve().relative_to(TESTS).parts[0]
    except ValueError:
        return None
    return folder if folder in KINDS else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        kind = kind_of(item.path)
        if kind is None:
            raise pytest.UsageError(
                f"{item.nodeid}: a test lives in tests/unit/ or tests/integration/, by kind"
            )
        item.add_marker(getattr(pytest.mark, kind))
