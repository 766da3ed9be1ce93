"""Item 6: `rackcert lab down SPEC` stops that spec's SSH hosts only, never another lab's.

Every lab spec's hosts share the owner "lab", so stopping by owner took the default lab's
hosts down with any other spec's. `stop_spec_hosts` (what `lab down` calls) stops the
hosts named after the spec's own VMs, and the subnet's bridge once nothing is attached to it.
"""

from __future__ import annotations

import os
from pathlib import Path

from rackcert.core.spec_loader import load_spec
from rackcert.lab.sshhosts.lab import start_lab_hosts, stop_spec_hosts
from rackcert.lab.sshhosts.network import (
    bridge_name,
    claim_subnet,
    netns_list,
    release_subnet,
    stop_owner,
)


def test_stopping_one_spec_leaves_the_other_labs_hosts_running(tmp_path: Path):
    owner = f"{os.getpid()}xdown"
    subnet = claim_subnet(owner=owner)
    base = subnet.rsplit(".", 1)[0]
    default = load_spec(Path("inventories/lab.yaml")).spec.model_copy(deep=True)
    other = default.model_copy(deep=True)
    for spec, first, prefix in ((default, 11, ""), (other, 21, "other-")):
        for i, vm in enumerate(spec.vms):
            vm.address = f"{base}.{first + i}"
            vm.name = prefix + vm.name
        spec.guest.ssh.key_file = str(tmp_path / f"{prefix}key" / "id_ed25519")
        spec.storage.nfs.export = str(tmp_path / "export")
    try:
        kept = start_lab_hosts(default, owner=owner)
        gone = start_lab_hosts(other, owner=owner)
        assert stop_spec_hosts(other, owner=owner) == len(gone)
        namespaces = netns_list()
        assert all(h.netns not in namespaces for h in gone)
        assert all(h.netns in namespaces and h.ssh("true").returncode == 0 for h in kept)
        assert Path("/sys/class/net", bridge_name(subnet)).exists()  # still in use
        assert stop_spec_hosts(default, owner=owner) == len(kept)
        assert not Path("/sys/class/net", bridge_name(subnet)).exists()
    finally:
        stop_owner(owner)
        release_subnet(subnet)
