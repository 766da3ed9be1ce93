"""Where the tests' shared files are, named once: test modules sit one folder deeper than
they used to (tests/unit/, tests/integration/), so a path counted from `__file__` in each
module is a path to get wrong."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
SUPPORT = TESTS / "support"
FAKES = SUPPORT / "fakes"  # stand-ins for what a CPU machine cannot have, named as fakes
FIXTURES = SUPPORT / "fixtures"  # output captured from real hardware and tools
