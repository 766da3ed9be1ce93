"""The roles as the collection rackcert.gpu, driven by plain ansible-playbook.

`ansible-galaxy collection build playbooks/` makes the tarball a site would publish; it is
installed into a fresh collections path, and `ansible-playbook playbooks/site.yml -i FILE`
(FILE from `rackcert configure --write-inventory`) runs its network role against a real
SSH test host, with no rackcert in between and no roles path: only the built collection.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import yaml

from rackcert.core.paths import playbooks_dir
from tests.support.plugins.configure import spec_for_hosts

BIN = Path(sys.executable).parent


def _run(argv, **kwargs):  # noqa: ANN003
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, **kwargs)


def _galaxy_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    return env | {"ANSIBLE_HOME": str(home), "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}"}


def test_built_collection_drives_the_rack_from_the_written_inventory(ssh_hosts, tmp_path):
    env = _galaxy_env(tmp_path / "ansible-home")
    built = _run(
        [str(BIN / "ansible-galaxy"), "collection", "build", str(playbooks_dir())]
        + ["--output-path", str(tmp_path / "dist")],
        env=env,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (tarball,) = (tmp_path / "dist").glob("rackcert-gpu-*.tar.gz")
    with tarfile.open(tarball) as tar:
        names = set(tar.getnames())
    assert {"MANIFEST.json", "meta/runtime.yml", "roles/network/tasks/main.yml"} <= names
    assert not any(n.endswith(".tar.gz") for n in names)
    collections = tmp_path / "collections"
    installed = _run(
        [
            str(BIN / "ansible-galaxy"),
            "collection",
            "install",
            str(tarball),
            "-p",
            str(collections),
        ],
        env=env,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert (collections / "ansible_collections/rackcert/gpu/roles/network").is_dir()

    (host,) = ssh_hosts(["node1"])
    loaded = spec_for_hosts([host], tmp_path / "spec")
    inventory = tmp_path / "rack.yml"
    wrote = _run(
        [sys.executable, "-m", "rackcert.cli", "configure", str(loaded.path)]
        + ["--write-inventory", str(inventory)],
    )
    assert wrote.returncode == 0, wrote.stdout + wrote.stderr
    assert f"ansible-playbook {playbooks_dir() / 'site.yml'} -i {inventory}" in " ".join(
        wrote.stdout.split()
    )
    hosts = yaml.safe_load(inventory.read_text().replace("!unsafe", ""))["all"]["children"]
    assert list(hosts["rackcert_nodes"]["hosts"]) == ["node1"]
    assert not (tmp_path / "runs").exists()  # writing the inventory ran nothing

    play = _run(
        [str(BIN / "ansible-playbook"), str(playbooks_dir() / "site.yml"), "-i", str(inventory)]
        + ["--tags", "network"],
        cwd=tmp_path,
        env=env
        | {
            "ANSIBLE_COLLECTIONS_PATH": str(collections),
            "ANSIBLE_SSH_ARGS": f"-o UserKnownHostsFile={host.known_hosts} -o IdentitiesOnly=yes",
        },
    )
    out = play.stdout + play.stderr
    assert play.returncode == 0, out[-3000:]
    assert "rackcert.gpu.network : " in out
    assert host.path("/sys/class/net/eth0/mtu").read_text().strip() == "9000"
