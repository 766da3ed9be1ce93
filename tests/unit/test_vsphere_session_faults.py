"""A vCenter that answers HTTP 500, and plain http off the loopback: one line, exit 2.

The 500 comes from a real HTTP server on the loopback that answers every request with
500, as the reverse proxy in front of a vCenter does while its services are down
(any service on the spec's port that is not vCenter behaves the same for pyVmomi).
"""

from __future__ import annotations

import pytest

from tests.support.vsphere_session_faults import spec_at as _spec


def test_plain_http_opt_in_is_accepted_and_warned(tmp_path):
    from provision.session import InsecureSessionWarning, ssl_context
    from rackcert.core.spec_loader import load_spec

    spec = _spec(tmp_path, "10.20.30.40", 80, "\n  allow_plain_http: true")
    loaded = load_spec(spec)
    with pytest.warns(InsecureSessionWarning, match="in clear"):
        assert ssl_context(loaded.spec.vcenter) is None
    assert load_spec(_spec(tmp_path, "127.0.0.1", 80)).spec.vcenter.protocol == "http"
