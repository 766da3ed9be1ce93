"""The guest layer's Ansible tags are site.yml's, and a roll runs only the roles of the
components it moves: a driver-only roll does not rerun NFS, SSH trust or Slurm on a node."""

from __future__ import annotations

from dataclasses import replace

import yaml

from rackcert.core.paths import REPO_ROOT
from rackcert.core.spec_loader import LoadedSpec, parse_spec
from rackcert.core.upgrade_layers import GUEST, Change, Step, diff, guest_tags, layers, registered
from rackcert.core.upgrade_layers.guest import GUEST_COMPONENTS
from rackcert.rollout import ConfigureGuest
from tests.support.upgrade_helpers import four_node, upgraded


def _site_tags() -> set[str]:
    plays = yaml.safe_load((REPO_ROOT / "playbooks" / "site.yml").read_text())
    return {t for play in plays for role in play.get("roles", []) for t in role.get("tags", [])}


def _loaded(data: dict) -> LoadedSpec:
    return parse_spec(yaml.safe_dump(data, sort_keys=False), "spec.yaml")


def test_every_declared_tag_is_a_role_tag_of_site_yml():
    tags = _site_tags()
    assert {"nvidia_driver", "storage_nfs", "ssh_trust", "slurm"} <= tags  # read right
    declared = {
        (la.name, comp, tag) for la in layers() for comp, ts in la.tags.items() for tag in ts
    }
    assert declared
    assert [d for d in declared if d[2] not in tags] == []


def test_every_guest_component_has_its_roles():
    guest = next(la for la in layers("guest") if la.name == "guest")
    assert set(guest.tags) == set(GUEST_COMPONENTS)


def test_a_driver_only_roll_runs_the_driver_roles_only(tmp_path):
    data = four_node(hosts=1)
    before, new = _loaded(data), _loaded(upgraded(data, esxi="7.0.3u"))
    tags = guest_tags(diff(before.spec, new.spec))
    assert tags == ("nvidia_driver", "vgpu_license", "nvidia_peermem")
    assert not {"storage_nfs", "ssh_trust", "slurm", "network", "dl_runtime"} & set(tags)
    guest = ConfigureGuest(new, before, None, None)  # type: ignore[arg-type]
    assert guest.tags == tags


def test_the_roles_of_each_moved_component_once_in_declaration_order():
    data = four_node(hosts=1)
    new = upgraded(data, esxi=None)
    new["guest"]["ofed"] = "24.10-1.1.4.0"
    tags = guest_tags(diff(_loaded(data).spec, _loaded(new).spec))
    assert tags == ("nvidia_driver", "vgpu_license", "nvidia_peermem", "ofed", "mlx_ats")


def test_a_component_without_declared_roles_runs_every_role():
    tags = dict(GUEST.tags)
    del tags["nccl"]
    steps = (Step("guest layer 2", "configure ends ok"),)
    bare = replace(GUEST, name="guest2", tags=tags, steps=steps)
    with registered(bare):
        assert guest_tags([Change("guest2", "nccl", "2.20", "2.21")]) is None
        assert guest_tags([Change("guest2", "cuda", "12.2", "12.4")]) == ("cuda", "nccl_tests")


def test_a_host_only_roll_has_no_guest_roles():
    data = four_node(hosts=1)
    new = upgraded(data, driver=data["guest"]["nvidia_driver"])
    assert guest_tags(diff(_loaded(data).spec, _loaded(new).spec)) == ()
