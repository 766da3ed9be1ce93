"""What more than one test module needs from the old test_upgrade_roll.py:
tests/integration/test_upgrade_roll.py, tests/unit/test_upgrade_roll.py.
"""

from __future__ import annotations

from tests.support.upgrade_helpers import (
    four_node,
    spec_of,
    upgraded,
)


def pair(**kw):
    data = four_node(**kw)
    return data, spec_of(data), spec_of(upgraded(data))
