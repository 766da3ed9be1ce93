"""Fixture: the package sources vendors ship, as stand-ins around the FAKE vendor repo.

    def test_x(vendor_sources):
        vendor_sources.signed       # a copy of the fake repo with InRelease signed by a test key
        vendor_sources.key          # that key, ASCII-armoured (the key_file of a spec)
        vendor_sources.wrong_key    # another key: apt must refuse the repo with it
        vendor_sources.tarball      # MLNX_OFED-like .tgz: MLNX_OFED_LINUX-<v>-debian12-x86_64/DEBS/
        vendor_sources.iso          # an ISO 9660 image with the same layout (xorriso)

Keys are made with gpg in a throw-away GNUPGHOME; the Release file is written here the way
apt's flat-repository format asks (Debian wiki "DebianRepository/Format", "Flat Repository
Format": Release lists the index files with their SHA256 and size; InRelease is the
clear-signed Release). Everything lives under one 0755 directory in /tmp, because apt reads
repositories as the unprivileged _apt user.
"""

from __future__ import annotations

import email.utils
import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.plugins.fake_vendor_repo import FakeVendorRepo, build_fake_vendor_repo

OFED_TOP = "MLNX_OFED_LINUX-5.4-3.1.0.0-debian12-x86_64"


@dataclass(frozen=True)
class VendorSources:
    repo: FakeVendorRepo
    signed: Path
    key: Path
    wrong_key: Path
    tarball: Path
    iso: Path


def _gpg(home: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:  # noqa: ANN003
    return subprocess.run(
        ["gpg", "--batch", "--pinentry-mode", "loopback", "--passphrase", "", *args],
        env=dict(os.environ, GNUPGHOME=str(home)),
        check=True,
        capture_output=True,
        **kwargs,
    )


def make_key(home: Path, uid: str, out: Path) -> Path:
    """A fresh ed25519 signing key in `home`; its public half, armoured, at `out`."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    _gpg(home, "--quick-gen-key", uid, "ed25519", "sign", "never")
    out.write_bytes(_gpg(home, "--armor", "--export", uid).stdout)
    return out


def sign_flat_repo(directory: Path, home: Path, uid: str) -> None:
    """Write Release (SHA256 of Packages) and InRelease, clear-signed by `uid`."""
    lines = ["Origin: rackcert-tests", "Label: rackcert-tests FAKE vendor packages"]
    lines.append("Date: " + email.utils.formatdate(usegmt=True))
    lines.append("SHA256:")
    for name in ("Packages",):
        data = (directory / name).read_bytes()
        lines.append(f" {hashlib.sha256(data).hexdigest()} {len(data)} {name}")
    (directory / "Release").write_text("\n".join(lines) + "\n")
    _gpg(
        home,
        "--local-user",
        uid,
        "--clearsign",
        "--output",
        str(directory / "InRelease"),
        str(directory / "Release"),
    )


def _ofed_layout(repo: Path, root: Path) -> Path:
    """<root>/<OFED_TOP>/DEBS/ holding the repo, as MLNX_OFED's tarball and ISO hold theirs."""
    debs = root / OFED_TOP / "DEBS"
    shutil.copytree(repo, debs)
    (root / OFED_TOP / "mlnxofedinstall").write_text("#!/bin/sh\necho FAKE installer\n")
    return root


def build_vendor_sources(base: Path) -> VendorSources:
    repo = build_fake_vendor_repo(base / "repo")
    home = base / "gnupg"
    key = make_key(home, "rackcert FAKE vendor <vendor@rackcert.invalid>", base / "vendor.asc")
    wrong = make_key(home, "someone else <other@rackcert.invalid>", base / "wrong.asc")
    signed = base / "signed"
    shutil.copytree(repo.path, signed)
    sign_flat_repo(signed, home, "vendor@rackcert.invalid")
    layout = _ofed_layout(repo.path, base / "layout")
    tarball = base / f"{OFED_TOP}.tgz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(layout / OFED_TOP, arcname=OFED_TOP)
    iso = base / f"{OFED_TOP}.iso"
    subprocess.run(
        ["xorriso", "-as", "mkisofs", "-R", "-J", "-V", "MLNX_OFED", "-o", str(iso), str(layout)],
        check=True,
        capture_output=True,
    )
    return VendorSources(repo, signed, key, wrong, tarball, iso)


@pytest.fixture(scope="session")
def vendor_sources() -> Iterator[VendorSources]:
    base = Path(tempfile.mkdtemp(prefix=f"rackcert-vendor-sources-{os.getpid()}-", dir="/tmp"))
    base.chmod(0o755)
    try:
        yield build_vendor_sources(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
