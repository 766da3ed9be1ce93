"""Host variables that take nodes back to the versions an earlier run found on them.

Why: a rolling upgrade must be able to go back. Before any role changes a node,
rackcert_facts records what it runs (configure.json, hosts.<vm>.outcomes.rackcert_facts_versions:
driver version and package, container toolkit, OFED). `rackcert configure --versions-from
RUN` (and `configure(versions_from=...)`, which `rackcert upgrade` calls per node) turns that
record into per-host inventory variables, which win over the spec's group variables, so each
node goes back to its own recorded versions through the same roles.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rackcert.core.errors import InputError

OUTCOME = "rackcert_facts_versions"
# recorded key -> the role variable it becomes (only recorded, non-empty values are used).
RECORD_VARS = {
    "nvidia_driver": "nvidia_driver_version",
    "nvidia_driver_package": "nvidia_driver_package",
    "container_toolkit": "container_toolkit_version",
    "container_toolkit_package": "container_toolkit_package",
    "ofed": "ofed_version",
}


def _record_file(source: Path) -> Path:
    path = source / "configure.json" if source.is_dir() else source
    if not path.is_file():
        raise InputError(
            f"--versions-from {source}: no configure.json there (give a configure run)"
        )
    return path


def recorded_versions(source: Path) -> dict[str, dict[str, str]]:
    """vm -> the versions recorded before `source`'s run changed anything (empty ones left out)."""
    path = _record_file(source)
    try:
        hosts = json.loads(path.read_text())["data"]["hosts"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"--versions-from {path}: not a configure record ({exc})") from None
    out: dict[str, dict[str, str]] = {}
    for vm, host in hosts.items():
        seen = (host.get("outcomes") or {}).get(OUTCOME) or {}
        out[vm] = {k: str(seen[k]) for k in RECORD_VARS if seen.get(k)}
    return out


def versions_host_vars(source: Path, vms: list[str]) -> dict[str, dict[str, Any]]:
    """vm -> role variables for the `vms` the record names; an error when it names none."""
    versions = recorded_versions(source)
    picked = {vm: versions[vm] for vm in vms if versions.get(vm)}
    if not picked:
        names = ", ".join(sorted(versions)) or "no host"
        raise InputError(
            f"--versions-from {source}: no recorded versions for {', '.join(vms)}"
            f" (the record has {names})"
        )
    return {vm: {RECORD_VARS[k]: v for k, v in rec.items()} for vm, rec in picked.items()}
