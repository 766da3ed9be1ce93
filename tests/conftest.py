"""Test-suite wiring: every module in tests/plugins/ is a pytest plugin.

Each area (vcsim twin, SSH test hosts, ...) keeps its fixtures in its own plugin
module, so fixtures are shared without one conftest that everybody edits.
"""

from __future__ import annotations

from pathlib import Path

pytest_plugins = sorted(
    f"tests.plugins.{p.stem}"
    for p in (Path(__file__).parent / "plugins").glob("*.py")
    if p.stem != "__init__"
)
