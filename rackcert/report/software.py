"""Software versions per node, read tolerantly from whatever the stages recorded.

Facts come from `facts.json` (the pyinfra snapshot validate takes), from
validate.json's per-node section and from bench.json's environment. Their
exact shapes belong to other stages and may grow, so this module looks for
well-known keys at any depth instead of one fixed path, and maps them onto the
report's canonical names (nvidia_driver, cuda, ofed, ...). A value it cannot
find stays absent: the matrix then says "unknown", it never guesses.
"""

from __future__ import annotations

import re
from typing import Any

from rackcert.core.check_components import CHECK_COMPONENTS

# canonical name -> leaf keys (lowercase, '-' as '_') that carry it, best first
ALIASES: dict[str, tuple[str, ...]] = {
    "nvidia_driver": ("nvidia_driver", "nvidia_driver_version", "driver_version"),
    "cuda": ("cuda", "cuda_version", "cuda_driver_version"),
    "ofed": ("ofed", "ofed_version", "mlnx_ofed", "ofed_info"),
    "os": ("os", "os_release", "os_pretty_name", "pretty_name", "distro"),
    "kernel": ("kernel", "kernel_version", "kernel_release", "kernelversion"),
    "container_toolkit": (
        "container_toolkit",
        "nvidia_container_toolkit",
        "nvidia_ctk",
        "nvidia_container_toolkit_version",
    ),
    "container_runtime": ("container_runtime", "docker_version"),
    "nccl": ("nccl", "nccl_version"),
    "torch": ("torch", "torch_version", "pytorch"),
    "horovod": ("horovod", "horovod_version"),
    "python": ("python", "python_version"),
    "nic_firmware": ("nic_firmware", "firmware_version", "fw_version", "nic_fw"),
    "gpu_model": ("gpu_model", "gpu_name"),
    "gpu_count": ("gpu_count",),
    "nic_model": ("nic_model",),
    "bios_version": ("bios_version", "bios"),
}
# Bare words that are only trusted at the top level of a node's facts (a NIC's
# "driver" is mlx5_core, not the NVIDIA driver).
TOP_ONLY: dict[str, tuple[str, ...]] = {
    "nvidia_driver": ("driver",),
    "gpu_model": ("gpu",),
}
PACKAGE_NAMES: dict[str, tuple[str, ...]] = {
    "container_toolkit": ("nvidia-container-toolkit", "nvidia-container-toolkit-base"),
    "ofed": ("mlnx-ofed-all", "mlnx-ofed-basic", "mlnx-ofed-kernel-utils"),
}
_MAX_LEN = 200


def _norm(key: str) -> str:
    return re.sub(r"[^a-z0-9_]", "_", key.lower().replace("-", "_"))


def _scalar(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        text = " ".join(value.split())
        return text[:_MAX_LEN] if text else None
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return ", ".join(sorted({" ".join(v.split()) for v in value}))[:_MAX_LEN]
    if isinstance(value, dict):
        for key in ("version", "value", "full"):
            if key in value:
                return _scalar(value[key])
    return None


# Big fact tables that hold no version of interest but many misleading keys.
_SKIP = {
    "sysctl",
    "mounts",
    "kernel_modules",
    "release_meta",
    "deb_packages",
    "rpm_packages",
    "packages",
    "debpackages",
    "rpmpackages",
    "nics",
    "fact_errors",
}


def _walk(obj: Any, depth: int = 0, skip: bool = True):
    """(depth, normalised leaf key, value) for every key of nested dicts."""
    if depth > 6 or not isinstance(obj, dict):
        return
    for key, value in obj.items():
        norm = _norm(str(key))
        yield depth, norm, value
        if isinstance(value, dict) and not (skip and norm in _SKIP):
            yield from _walk(value, depth + 1, skip)


def versions_from_facts(facts: Any) -> dict[str, str]:
    """Canonical versions found in one node's facts, e.g. {'nvidia_driver': '470.82.01'}."""
    if not isinstance(facts, dict):
        return {}
    found: dict[str, tuple[int, int, str]] = {}  # name -> (depth, alias rank, value)
    for depth, key, value in _walk(facts):
        for name, aliases in ALIASES.items():
            rank = aliases.index(key) if key in aliases else None
            if rank is None and depth == 0 and key in TOP_ONLY.get(name, ()):
                rank = len(aliases)
            if rank is None:
                continue
            text = _scalar(value)
            if text and (name not in found or (depth, rank) < found[name][:2]):
                found[name] = (depth, rank, text)
    out = {name: v[2] for name, v in found.items()}
    for name, value in _from_gpus(facts).items():
        out.setdefault(name, value)
    distro = _os_text(facts, out.get("os", ""))
    if distro:
        out["os"] = distro
    if "ofed" in out:
        out["ofed"] = _ofed_text(out["ofed"])
    return out


def _from_gpus(facts: dict[str, Any]) -> dict[str, str]:
    """validate's `gpus` fact: a list of nvidia-smi rows (name, driver_version, vbios_version)."""
    gpus = facts.get("gpus")
    if not isinstance(gpus, list) or not gpus or not all(isinstance(g, dict) for g in gpus):
        return {}
    out = {"gpu_count": str(len(gpus))}
    for name, field in (
        ("gpu_model", "name"),
        ("nvidia_driver", "driver_version"),
        ("gpu_vbios", "vbios_version"),
    ):
        values = sorted({str(g[field]) for g in gpus if g.get(field)})
        if values:
            out[name] = "; ".join(values)
    return out


_CUDA_PKG = re.compile(r"^cuda-(?:toolkit|runtime|libraries)-\d+-\d+$")


def versions_from_packages(facts: Any) -> dict[str, str]:
    """Versions from installed-package facts (deb/rpm): the last resort, package versions are
    spelled their own way (5.4-OFED.5.4.3.1.0.1)."""
    out: dict[str, str] = {}
    if not isinstance(facts, dict):
        return out
    for _depth, key, value in _walk(facts, skip=False):
        if key not in ("packages", "debpackages", "deb_packages", "rpmpackages") or not isinstance(
            value, dict
        ):
            continue
        for name, pkgs in PACKAGE_NAMES.items():
            for pkg in pkgs:
                text = _scalar(value.get(pkg))
                if text:
                    out.setdefault(name, text)
        cuda = sorted(k for k in value if _CUDA_PKG.match(str(k)))
        if cuda:
            out.setdefault("cuda", ".".join(cuda[-1].split("-")[-2:]))
    return out


def _os_text(facts: dict[str, Any], fallback: str) -> str:
    """pyinfra's LinuxDistribution is {name, major, minor, ...}: make it 'Ubuntu 20.04'."""
    for _depth, key, value in _walk(facts):
        if key in ("os", "linuxdistribution", "linux_distribution") and isinstance(value, dict):
            name = value.get("name") or ""
            major, minor = value.get("major"), value.get("minor")
            if name:
                parts = [str(major)] if major is not None else []
                if minor is not None:
                    parts.append(str(minor).zfill(2))
                return f"{name} {'.'.join(parts)}".strip()
    return fallback


def _ofed_text(text: str) -> str:
    """`ofed_info -s` prints 'MLNX_OFED_LINUX-5.4-3.1.0.0:'; keep the version."""
    match = re.search(r"(\d+\.\d+-[\d.]+\d)", text)
    return match.group(1) if match else text.rstrip(":")


def nodes_of(obj: Any) -> dict[str, Any]:
    """A facts document as {node: facts}: unwraps a stage record and a 'nodes'/'hosts' key."""
    if isinstance(obj, dict) and isinstance(obj.get("data"), dict) and "stage" in obj:
        obj = obj["data"]
    if isinstance(obj, dict):
        for key in ("nodes", "hosts", "facts"):
            if isinstance(obj.get(key), dict):
                return obj[key]
        if obj and all(isinstance(v, dict) for v in obj.values()):
            return obj
    if isinstance(obj, list):
        out = {}
        for item in obj:
            if isinstance(item, dict):
                name = item.get("node") or item.get("host") or item.get("name")
                if isinstance(name, str):
                    out[name] = item
        return out
    return {}


_TOPO_ROW = re.compile(r"^(GPU\d+)\s+(.*)$")


def nvlink_pairs_from_topo(text: str) -> list[tuple[str, str, str]]:
    """Bridged pairs in `nvidia-smi topo -m` output: [('GPU0', 'GPU1', 'NV12'), ...]."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    header = next((ln for ln in lines if re.match(r"^\s+GPU0\b", ln)), None)
    if header is None:
        return []
    columns = header.split()
    pairs: list[tuple[str, str, str]] = []
    for line in lines:
        match = _TOPO_ROW.match(line.strip())
        if not match:
            continue
        row, cells = match.group(1), match.group(2).split()
        for col, cell in zip(columns, cells, strict=False):
            if (
                col.startswith("GPU")
                and re.fullmatch(r"NV\d+", cell)
                and int(row[3:]) < int(col[3:])
            ):
                pairs.append((row, col, cell))
    return pairs


def find_topo(facts: Any) -> str | None:
    """The text of `nvidia-smi topo -m` somewhere in a node's facts, if it was kept."""
    for _depth, key, value in _walk(facts) if isinstance(facts, dict) else ():
        if isinstance(value, str) and ("topo" in key or "topology" in key) and "GPU0" in value:
            return value
    return None


def versions_from_checks(results: list[Any]) -> dict[str, dict[str, str]]:
    """{node: {component: observed}} from checks that observed a version (pass or fail), as
    rackcert.core.check_components names them: what the report shows when no fact carried it."""
    out: dict[str, dict[str, str]] = {}
    for r in results:
        name = CHECK_COMPONENTS.get(r.id)
        text = (r.observed or "").strip()
        if not name or r.status.value not in ("pass", "fail") or not text:
            continue
        if name != "gpu_model" and not re.search(r"\d", text):
            continue  # "not installed" and the like: no version was seen
        out.setdefault(r.node, {})[name] = text[:_MAX_LEN]
    return out
