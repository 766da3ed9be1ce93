"""What more than one test module needs from the old test_hgx_spec.py:
tests/integration/test_hgx_spec.py, tests/unit/test_hgx_spec.py.
"""

from __future__ import annotations

from rackcert.core.paths import inventories_dir
from tests.support.spec_helpers import example_data

HGX = inventories_dir() / "hgx-h200-4node.yaml"


def hgx_data() -> dict:
    return example_data(HGX)
