"""The roles as the Ansible collection `rackcert.gpu`, found from a checkout or a wheel.

Why a collection: sites that drive their racks with their own Ansible install roles by
fully qualified name (`rackcert.gpu.ofed`), the way they install NVIDIA's or
community.vmware's. playbooks/ is the collection's root (galaxy.yml, meta/runtime.yml,
roles/); site.yml names its roles by FQCN. `rackcert configure` needs no installed copy:
it points ANSIBLE_COLLECTIONS_PATH at a directory holding one link,
ansible_collections/rackcert/gpu -> playbooks/, so the run uses the roles it ships with.
"""

from __future__ import annotations

from pathlib import Path

from rackcert.core.paths import playbooks_dir

NAMESPACE, NAME = "rackcert", "gpu"
COLLECTION = f"{NAMESPACE}.{NAME}"


def collections_root(directory: Path, playbooks: Path | None = None) -> Path:
    """Make `directory` a collections path whose rackcert.gpu is `playbooks`; returns it.

    Example:
        env["ANSIBLE_COLLECTIONS_PATH"] = str(collections_root(tmp))
    """
    target = (playbooks or playbooks_dir()).resolve()
    link = directory / "ansible_collections" / NAMESPACE / NAME
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() and link.resolve() != target:
        link.unlink()
    if not link.is_symlink():
        link.symlink_to(target, target_is_directory=True)
    return directory
