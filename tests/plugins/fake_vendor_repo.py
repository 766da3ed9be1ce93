"""Fixture: a local apt repository of FAKE stand-ins for NVIDIA/Mellanox vendor packages.

The vendor roles (ofed, nvidia_driver, cuda, container_toolkit) cannot reach
NVIDIA from here, and there is no GPU; what can be exercised for real is the
install path: the source file, the targeted index refresh, the version pin, and
idempotence. Each package below is a real .deb built with dpkg-deb that only
installs a README saying it is a stand-in; two versions of some let a test prove
the pin picked the right one rather than the newest.

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


@dataclass(frozen=True)
class FakeVendorRepo:
    path: Path

    @property
    def sources(self) -> dict[str, dict[str, str]]:
        return {c: {"path": str(self.path), "package": n} for c, (n, _) in FAKE_PACKAGES.items()}


def _build_deb(work: Path, out: Path, name: str, version: str) -> None:
    root = work / f"{name}_{version}"
    (root / "DEBIAN").mkdir(parents=True)
    doc = root / "usr/share/doc" / name
    doc.mkdir(parents=True)
    (doc / "README.rackcert-fake").write_text(
        f"{name} {version}: a FAKE stand-in built by rackcert's tests; it installs nothing else.\n"
    )
    (root / "DEBIAN/control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: all\n"
        "Maintainer: rackcert tests <tests@rackcert.invalid>\nSection: misc\nPriority: optional\n"
        f"Description: FAKE stand-in for a vendor package (rackcert tests)\n"
    )
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(out)],
        check=True,
        capture_output=True,
    )


def build_fake_vendor_repo(directory: Path) -> FakeVendorRepo:
    """Build the .debs and the Packages index (dpkg-scanpackages) under `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    work = directory.parent / (directory.name + ".build")
    for name, versions in FAKE_PACKAGES.values():
        for version in versions:
            _build_deb(work, directory / f"{name}_{version}_all.deb", name, version)
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
