"""Fixture: a local apt repository of FAKE stand-ins for NVIDIA/Mellanox vendor packages.

The vendor roles (ofed, nvidia_driver, cuda, container_toolkit) cannot reach
NVIDIA from here, and there is no GPU; what can be exercised for real is the
install path: the source file, the targeted index refresh, the version pin, and
idempotence. Each package below is a real .deb built with dpkg-deb that only
installs a README saying it is a stand-in; two versions of some let a test prove
the pin picked the right one rather than the newest.

Version changes need the real packages' relations too (BRANCHES, CONTAINER_TOOLKIT):

- driver branches 535 and 550 as NVIDIA's Debian/Ubuntu repositories ship them:
  `cuda-drivers-<branch>` Depends on its branch's kernel-module package at least at its version,
  and the module packages of two branches Provide and Conflict one virtual name (Ubuntu's
  nvidia-driver-<branch> packages do this with nvidia-driver-binary / nvidia-kernel-common),
  so two branches cannot be installed side by side. The module package ships
  /usr/lib/rackcert-fake/nvidia/version, what `modinfo nvidia` would say of the module on
  disk; the FAKE reboot (tests/support/fakes/fake-reboot) "loads" it, and the FAKE nvidia-smi and
  /proc/driver/nvidia/version stand-in report the version loaded at that boot, never the one
  installed since.
- the container toolkit's four packages (NVIDIA container toolkit install guide: toolkit,
  -base, libnvidia-container-tools, libnvidia-container1), where the toolkit Depends on
  `-base (= v)` and `libnvidia-container-tools (>= v), (<< 2.0.0)` as the real one does: only
  a role that names all four at one version keeps a newer library out.

    def test_x(fake_vendor_repo):
        fake_vendor_repo.path      # directory with Packages + *.deb (deb [trusted=yes] file:...)
        fake_vendor_repo.sources   # guest.sources for a spec: {"ofed": {"path":..., "package":...}}
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# name -> versions built; the spec pins the first (lab.yaml: OFED 5.4-3.1.0.0,
# driver 470.82.01, container toolkit 1.14.3); the others are decoys.
FAKE_PACKAGES = {
    "ofed": ("rackcert-fake-mlnx-ofed-all", ["5.4-3.1.0.0-1", "5.8-1.0.1.1-1"]),
    "nvidia_driver": ("rackcert-fake-cuda-drivers-470", ["470.82.01-1", "470.103.01-1"]),
    "cuda": ("rackcert-fake-cuda-toolkit-11-4", ["11.4.4-1"]),
    "container_toolkit": ("rackcert-fake-nvidia-container-toolkit", ["1.14.3-1", "1.15.0-1"]),
}


# Driver branches: name -> versions; relations in _control (the first version is the lab's).
BRANCHES = {"535": ["535.161.08-1", "535.183.01-1"], "550": ["550.54.15-1", "550.90.07-1"]}
DRIVER = "rackcert-fake-cuda-drivers-{branch}"
KERNEL = "rackcert-fake-nvidia-kernel-{branch}"
# The container toolkit's companions (the toolkit itself is FAKE_PACKAGES' entry).
CONTAINER_TOOLKIT = {
    "base": "rackcert-fake-nvidia-container-toolkit-base",
    "tools": "rackcert-fake-libnvidia-container-tools",
    "lib": "rackcert-fake-libnvidia-container1",
}
MODULE_VERSION_FILE = "/usr/lib/rackcert-fake/nvidia/version"


@dataclass(frozen=True)
class FakeVendorRepo:
    path: Path

    @property
    def sources(self) -> dict[str, dict[str, str]]:
        return {c: {"path": str(self.path), "package": n} for c, (n, _) in FAKE_PACKAGES.items()}


def _build_deb(
    work: Path,
    out: Path,
    name: str,
    version: str,
    relations: str = "",
    files: dict[str, str] | None = None,
) -> None:
    root = work / f"{name}_{version}"
    (root / "DEBIAN").mkdir(parents=True)
    doc = root / "usr/share/doc" / name
    doc.mkdir(parents=True)
    (doc / "README.rackcert-fake").write_text(
        f"{name} {version}: a FAKE stand-in built by rackcert's tests; it installs nothing else.\n"
    )
    for path, text in (files or {}).items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    (root / "DEBIAN/control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: all\n{relations}"
        "Maintainer: rackcert tests <tests@rackcert.invalid>\nSection: misc\nPriority: optional\n"
        f"Description: FAKE stand-in for a vendor package (rackcert tests)\n"
    )
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(out)],
        check=True,
        capture_output=True,
    )


TOOLKIT = FAKE_PACKAGES["container_toolkit"][0]


def _toolkit_relations(version: str) -> str:
    """nvidia-container-toolkit's own Depends: -base at its version, the library tools at
    least at it (so apt alone would take the newest library)."""
    base, tools = CONTAINER_TOOLKIT["base"], CONTAINER_TOOLKIT["tools"]
    return f"Depends: {base} (= {version}), {tools} (>= {version}), {tools} (<< 2.0.0)\n"


def build_fake_vendor_repo(directory: Path) -> FakeVendorRepo:
    """Build the .debs and the Packages index (dpkg-scanpackages) under `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    work = directory.parent / (directory.name + ".build")
    for name, versions in FAKE_PACKAGES.values():
        for version in versions:
            relations = _toolkit_relations(version) if name == TOOLKIT else ""
            _build_deb(work, directory / f"{name}_{version}_all.deb", name, version, relations)
    for name in CONTAINER_TOOLKIT.values():
        for version in FAKE_PACKAGES["container_toolkit"][1]:
            _build_deb(work, directory / f"{name}_{version}_all.deb", name, version)
    for branch, versions in BRANCHES.items():
        for version in versions:
            kernel, driver = KERNEL.format(branch=branch), DRIVER.format(branch=branch)
            module = {MODULE_VERSION_FILE: version.rsplit("-", 1)[0] + "\n"}
            virtual = "rackcert-fake-nvidia-kernel"
            rel = f"Provides: {virtual}\nConflicts: {virtual}\nReplaces: {virtual}\n"
            _build_deb(
                work, directory / f"{kernel}_{version}_all.deb", kernel, version, rel, module
            )
            # NVIDIA's metapackages depend on their branch at least at their version (>=):
            # apt alone would take the newest module of the branch.
            rel = f"Depends: {kernel} (>= {version.rsplit('-', 1)[0]})\n"
            _build_deb(work, directory / f"{driver}_{version}_all.deb", driver, version, rel)
    index = subprocess.run(
        ["dpkg-scanpackages", "--multiversion", "."],
        cwd=directory,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    (directory / "Packages").write_text(index)
    return FakeVendorRepo(directory)


@pytest.fixture(scope="session")
def fake_vendor_repo() -> Iterator[FakeVendorRepo]:
    # Not under pytest's tmp dir: that is mode 0700, and apt reads repositories as
    # the unprivileged _apt user.
    base = Path(tempfile.mkdtemp(prefix=f"rackcert-fake-vendor-apt-{os.getpid()}-", dir="/tmp"))
    base.chmod(0o755)
    try:
        yield build_fake_vendor_repo(base / "repo")
    finally:
        shutil.rmtree(base, ignore_errors=True)
