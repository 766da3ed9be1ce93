"""Test-suite wiring: every module in tests/support/plugins/ is a pytest plugin.

Each area (vcsim twin, SSH test hosts, ...) keeps its fixtures in its own plugin
module, so fixtures are shared without one conftest that everybody edits.
"""

from __future__ import annotations

from pathlib import Path

# pytester: tests/unit/test_unit_guard.py runs small test files through pytest in-process.
pytest_plugins = [
    "pytester",
    *sorted(
        f"tests.support.plugins.{p.stem}"
        for p in (Path(__file__).parent / "support" / "plugins").glob("*.py")
        if p.stem != "__init__"
    ),
]
