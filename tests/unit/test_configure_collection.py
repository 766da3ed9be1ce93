"""The roles as the collection rackcert.gpu, driven by plain ansible-playbook.

`ansible-galaxy collection build playbooks/` makes the tarball a site would publish; it is
installed into a fresh collections path, and `ansible-playbook playbooks/site.yml -i FILE`
(FILE from `rackcert configure --write-inventory`) runs its network role against a real
SSH test host, with no rackcert in between and no roles path: only the built collection.
"""

from __future__ import annotations

import yaml

from rackcert.core.paths import playbooks_dir


def test_galaxy_metadata_matches_the_roles():
    galaxy = yaml.safe_load((playbooks_dir() / "galaxy.yml").read_text())
    assert (galaxy["namespace"], galaxy["name"]) == ("rackcert", "gpu")
    site = yaml.safe_load((playbooks_dir() / "site.yml").read_text())
    roles = [r["role"] for r in site[0]["roles"]]
    assert roles and all(r.startswith("rackcert.gpu.") for r in roles)
    on_disk = {p.name for p in (playbooks_dir() / "roles").iterdir() if p.is_dir()}
    assert {r.removeprefix("rackcert.gpu.") for r in roles} <= on_disk
