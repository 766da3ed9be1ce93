"""What more than one test module needs from the old test_guestinfo.py:
tests/integration/test_guestinfo.py, tests/unit/test_guestinfo.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rackcert.core.spec_loader import parse_spec as load_text

LAB = Path(__file__).resolve().parents[3] / "inventories" / "lab.yaml"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDMy7s0i4DhC2XcUbyrLz7Y1Fh0k8oGkq8y8hyZQ2nNm rackcert"


@pytest.fixture(scope="module")
def lab():
    """The lab spec with a gateway and DNS, as a site's management network has them."""
    text = LAB.read_text().replace(
        "    prefix: 24\n", "    prefix: 24\n    gateway: 10.77.0.1\n    dns: [10.77.0.2]\n"
    )
    spec = load_text(text).spec
    assert spec.network.management.gateway == "10.77.0.1"
    return spec
