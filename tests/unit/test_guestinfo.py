"""Cloud-init guestinfo of a cloned VM, judged by cloud-init itself (Debian's cloud-init).

The user-data goes through `cloud-init schema --config-file`; the metadata and
its encoding go through the VMware datasource's own `decode`,
`load_json_or_yaml` and `process_metadata`, and the network config through
cloud-init's network-state parser, run by the system Python that carries the
cloudinit package.
"""

from __future__ import annotations

from provision import guestinfo
from tests.support.plugins.guestinfo import KEY


def test_read_identity_is_what_cloud_init_applies_and_deterministic(lab):
    first = guestinfo.guestinfo(lab, lab.vms[1], [KEY])
    assert first == guestinfo.guestinfo(lab, lab.vms[1], [KEY])  # a second plan compares equal
    ident = guestinfo.read_identity(first)
    assert ident == {
        "hostname": "lab-node2",
        "address": "10.77.0.12",
        "prefix": 24,
        "gateway": "10.77.0.1",
        "authorized_keys": [KEY],
    }
    assert guestinfo.read_identity({}) is None
    assert guestinfo.read_identity({"guestinfo.metadata": "%%%", "x": ""}) is None
    plain = {"guestinfo.metadata": "local-hostname: h\n", "guestinfo.metadata.encoding": "b64"}
    assert guestinfo.read_identity(plain) is None  # not base64: unreadable, not a crash
