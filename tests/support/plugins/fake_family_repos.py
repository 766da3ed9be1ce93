"""Fixture: FAKE package repositories shaped like the vendors' for Ubuntu and RHEL 9 test hosts.

Each package is a FAKE stand-in that installs a README (and, for the driver's kernel-module
package, the file the FAKE reboot "loads": tests/support/fakes/fake-reboot); what is real is the
repositories' shape, which the roles' package transactions go through:

- NVIDIA's CUDA repository for rhel9 (`cuda-rhel9-x86_64`): rpms with NVIDIA's names and
  relations, and modulemd v2 metadata (modifyrepo_c --mdtype=modules) for the
  `nvidia-driver` module with streams `<branch>-dkms` (kmod-nvidia-latest-dkms) and
  `<branch>-open` (kmod-nvidia-open-dkms), each listing its rpms as artifacts (NVIDIA Driver
  Installation Guide, Red Hat: `dnf module enable nvidia-driver:<branch>-dkms`, then
  `dnf install cuda-drivers`; cuda-drivers Requires nvidia-driver-cuda and the kernel module at
  its version; the two module flavours Conflict).
- NVIDIA's CUDA repositories for ubuntu2204 and ubuntu2404 (flat apt repositories): per
  branch `cuda-drivers-<branch>` -> `nvidia-driver-<branch>-open` -> `nvidia-dkms-<branch>` and
  `libnvidia-compute-<branch>` at its version. Two branches' module and library packages
  Provide and Conflict one virtual name (nvidia-dkms-kernel, libnvidia-compute), as Ubuntu's
  do, so two branches never install side by side.
- CUDA toolkit packages (`cuda-toolkit-12-4`), NVIDIA container toolkit's four packages
  (toolkit Requires -base at its version and libnvidia-container-tools >= it), DOCA-Host /
  MLNX_OFED's `mlnx-ofed-all`, for both families.
- EPEL 9's `slurm`, `slurm-slurmd`, `munge` and `dkms`, marked as EPEL's (Vendor "Fedora
  Project", the release tag `.el9`, in their own repository `epel`); AppStream's
  `python3-dnf-plugin-versionlock`; the base image's `redhat-release` (it tells dnf its
  $releasever through `system-release(releasever)`), installed by rpm when an EL host is made.

Built once per content (a hash of this file and the lab's release spec), under /var/tmp,
world-readable (apt reads repositories as the _apt user), and kept between sessions: ~3 s the
first time, nothing after.

    def test_x(fake_family_repos):
        fake_family_repos.el / "cuda-rhel9-x86_64"   # baseurl=file://... for dnf
        fake_family_repos.deb("ubuntu2204", "cuda")  # a flat apt repository directory
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from rackcert.lab import guestfamily
from tests.support.plugins.fake_vendor_repo import MODULE_VERSION_FILE

# Branch -> versions (the first is pinned by the tests; the second is the decoy a stray
# `dnf upgrade` / `apt-get upgrade` would take).
DRIVERS = {"535": ["535.161.08", "535.183.01"], "550": ["550.54.15", "550.90.07"]}
TOOLKIT = ["1.14.3", "1.15.0"]
CUDA = {"12-4": "12.4.1"}
OFED = ["24.04-0.6.6.0", "24.10-1.1.4.0"]
UBUNTU = ("ubuntu2204", "ubuntu2404")
EL_RELEASE = "1.el9"
CACHE_ROOT = Path(os.environ.get("RACKCERT_FAKE_REPO_CACHE", "/var/tmp"))


@dataclass(frozen=True)
class FamilyRepos:
    root: Path

    @property
    def el(self) -> Path:
        """Directories of yum repositories (createrepo_c), one per vendor repository."""
        return self.root / "el9"

    def deb(self, distro: str, repo: str) -> Path:
        """A flat apt repository (Packages) of one vendor for ubuntu2204 or ubuntu2404."""
        return self.root / distro / repo

    @property
    def base_rpms(self) -> list[Path]:
        """What a RHEL 9 image has before any role runs, for rackcert.lab.hostfamily."""
        return sorted((self.root / "el9-base").glob("*.rpm"))


# -- rpm ----------------------------------------------------------------------------------------
def _spec(name: str, version: str, subs: dict[str, str], main: str = "", **kw: str) -> str:
    """An rpm spec: the main package and subpackages, each with its own preamble lines."""
    vendor = kw.get("vendor", "FAKE stand-in (rackcert tests)")
    release = kw.get("release", EL_RELEASE)
    arch = kw.get("arch", "x86_64")
    head = (
        f"Name: {name}\nVersion: {version}\nRelease: {release}\nSummary: FAKE {name}\n"
        f"License: FAKE\nVendor: {vendor}\nPackager: {vendor}\nBuildArch: {arch}\n{main}"
        f"%description\nFAKE stand-in for {name} {version} built by rackcert's tests.\n"
    )
    files = ["%install", f"mkdir -p %{{buildroot}}/usr/share/doc/rackcert-fake/{name}"]
    files.append(f"echo FAKE > %{{buildroot}}/usr/share/doc/rackcert-fake/{name}/README")
    listing = [f"%files\n/usr/share/doc/rackcert-fake/{name}/README"]
    for sub, pre in subs.items():
        head += f"%package -n {sub}\nSummary: FAKE {sub}\n{pre}%description -n {sub}\nFAKE\n"
        d = f"/usr/share/doc/rackcert-fake/{sub}"
        files += [f"mkdir -p %{{buildroot}}{d}", f"echo FAKE > %{{buildroot}}{d}/README"]
        extra = ""
        if sub.startswith("kmod-nvidia"):
            # The module on disk, as the FAKE reboot reads it (what modinfo would say).
            m = MODULE_VERSION_FILE
            files += [
                f"mkdir -p %{{buildroot}}{Path(m).parent}",
                f"echo %{{version}} > %{{buildroot}}{m}",
            ]
            extra = f"\n{m}"
        listing.append(f"%files -n {sub}\n{d}/README{extra}")
    return head + "\n".join(files) + "\n" + "\n".join(listing) + "\n"


def _rpmbuild(work: Path, out: Path, spec: str, tag: str) -> None:
    path = work / f"{tag}.spec"
    path.write_text(spec)
    subprocess.run(
        ["rpmbuild", "-bb", "--quiet", "--define", f"_topdir {work / 'top'}",
         "--define", f"_rpmdir {out}",
         "--define", "_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm",
         "--define", "_binary_payload w2.xzdio", str(path)],
        check=True, capture_output=True,
    )  # fmt: skip


def _driver_rpms(work: Path, out: Path) -> str:
    """Every driver version's rpms; returns the modulemd documents of the streams."""
    docs = []
    for branch, versions in DRIVERS.items():
        for v in versions:
            subs = {
                "nvidia-driver-cuda": f"Requires: nvidia-driver = {v}\n",
                "nvidia-driver": "",
                "kmod-nvidia-latest-dkms": (
                    f"Provides: nvidia-kmod = {v}\nConflicts: kmod-nvidia-open-dkms\n"
                    "Requires: dkms\n"
                ),
                "kmod-nvidia-open-dkms": (
                    f"Provides: nvidia-kmod = {v}\nConflicts: kmod-nvidia-latest-dkms\n"
                    "Requires: dkms\n"
                ),
            }
            main = f"Requires: nvidia-driver-cuda = {v}\nRequires: nvidia-kmod = {v}\n"
            _rpmbuild(work, out, _spec("cuda-drivers", v, subs, main), f"driver-{v}")
        for flavour, kmod in (
            ("dkms", "kmod-nvidia-latest-dkms"),
            ("open", "kmod-nvidia-open-dkms"),
        ):
            names = ["cuda-drivers", "nvidia-driver-cuda", "nvidia-driver", kmod]
            artifacts = "".join(
                f"      - {n}-0:{v}-{EL_RELEASE}.x86_64\n" for v in versions for n in names
            )
            docs.append(
                "---\ndocument: modulemd\nversion: 2\ndata:\n  name: nvidia-driver\n"
                f"  stream: {branch}-{flavour}\n  version: {versions[-1].replace('.', '')}\n"
                f"  context: 00000000\n  arch: x86_64\n"
                f"  summary: FAKE nvidia-driver {branch}-{flavour}\n"
                "  description: FAKE stand-in of NVIDIA's driver module stream\n"
                "  license:\n    module: [MIT]\n"
                "  dependencies:\n  - buildrequires:\n      platform: [el9]\n"
                "    requires:\n      platform: [el9]\n"
                f"  profiles:\n    default:\n      rpms: [cuda-drivers]\n"
                f"  artifacts:\n    rpms:\n{artifacts}..."
            )
    return "\n".join(docs) + "\n"


def _build_el(work: Path, root: Path) -> None:
    cuda = root / "el9" / "cuda-rhel9-x86_64"
    modules = _driver_rpms(work, cuda)
    for v in TOOLKIT:
        subs = {"nvidia-container-toolkit-base": "", "libnvidia-container-tools": "",
                "libnvidia-container1": ""}  # fmt: skip
        main = (
            f"Requires: nvidia-container-toolkit-base = {v}\n"
            f"Requires: libnvidia-container-tools >= {v}\n"
            "Requires: libnvidia-container-tools < 2.0.0\n"
        )
        _rpmbuild(
            work, cuda, _spec("nvidia-container-toolkit", v, subs, main, release="1"), f"ctk-{v}"
        )
    for short, v in CUDA.items():
        _rpmbuild(work, cuda, _spec(f"cuda-toolkit-{short}", v, {}), f"cuda-{v}")
    doca = root / "el9" / "doca-rhel9"
    for v in OFED:
        ver, rel = v.split("-", 1)
        _rpmbuild(work, doca, _spec("mlnx-ofed-all", ver, {}, release=rel), f"ofed-{v}")
    epel = root / "el9" / "epel"
    # EPEL 9's own builds: Vendor "Fedora Project", release tag .el9.
    for name, v, subs in (("slurm", "22.05.9", {"slurm-slurmd": ""}), ("munge", "0.5.13", {}),
                          ("dkms", "3.0.13", {})):  # fmt: skip
        _rpmbuild(work, epel, _spec(name, v, subs, vendor="Fedora Project"), f"epel-{name}")
    appstream = root / "el9" / "appstream"
    _rpmbuild(work, appstream, _spec("python3-dnf-plugin-versionlock", "4.3.0", {},
              release="13.el9", arch="noarch"), "versionlock")  # fmt: skip
    # The base image's release package is the lab's own stand-in (rackcert.lab.guestfamily):
    # the one a lab VM of the family boots with.
    base = root / "el9-base"
    base.mkdir(parents=True)
    shutil.copy2(guestfamily.release_rpm(work / "release"), base)
    for repo in (cuda, doca, epel, appstream):
        subprocess.run(["createrepo_c", "-q", "--no-database", str(repo)], check=True,
                       capture_output=True)  # fmt: skip
    (work / "modules.yaml").write_text(modules)
    subprocess.run(
        ["modifyrepo_c", "--mdtype=modules", str(work / "modules.yaml"), str(cuda / "repodata")],
        check=True, capture_output=True,
    )  # fmt: skip


# -- deb ----------------------------------------------------------------------------------------
def _deb(
    work: Path, out: Path, name: str, version: str, rel: str = "", files: dict | None = None
) -> None:
    root = work / f"{out.parent.name}-{name}_{version}"
    (root / "DEBIAN").mkdir(parents=True)
    doc = root / "usr/share/doc" / name
    doc.mkdir(parents=True)
    (doc / "README.rackcert-fake").write_text(f"{name} {version}: a FAKE stand-in.\n")
    for path, text in (files or {}).items():
        (root / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / path.lstrip("/")).write_text(text)
    (root / "DEBIAN/control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: all\n{rel}"
        "Maintainer: rackcert tests <tests@rackcert.invalid>\nSection: misc\nPriority: optional\n"
        "Description: FAKE stand-in for a vendor package (rackcert tests)\n"
    )
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root),
         str(out / f"{name}_{version}_all.deb")],
        check=True, capture_output=True,
    )  # fmt: skip


def _build_ubuntu(work: Path, root: Path, distro: str) -> None:
    cuda = root / distro / "cuda"
    cuda.mkdir(parents=True)
    for branch, versions in DRIVERS.items():
        for v in versions:
            deb = f"{v}-0ubuntu1"
            _deb(work, cuda, f"cuda-drivers-{branch}", deb,
                 f"Depends: nvidia-driver-{branch}-open (>= {v})\n")  # fmt: skip
            _deb(work, cuda, f"nvidia-driver-{branch}-open", deb,
                 f"Depends: nvidia-dkms-{branch} (= {deb}),"
                 f" libnvidia-compute-{branch} (= {deb})\n")  # fmt: skip
            virtual = "Provides: {0}\nConflicts: {0}\nReplaces: {0}\n"
            _deb(work, cuda, f"nvidia-dkms-{branch}", deb, virtual.format("nvidia-dkms-kernel"),
                 {MODULE_VERSION_FILE: v + "\n"})  # fmt: skip
            _deb(
                work, cuda, f"libnvidia-compute-{branch}", deb, virtual.format("libnvidia-compute")
            )
    for short, v in CUDA.items():
        _deb(work, cuda, f"cuda-toolkit-{short}", f"{v}-1")
    ctk = root / distro / "nvidia-container-toolkit"
    ctk.mkdir(parents=True)
    for v in TOOLKIT:
        deb = f"{v}-1"
        rel = (f"Depends: nvidia-container-toolkit-base (= {deb}), libnvidia-container-tools"
               f" (>= {deb}), libnvidia-container-tools (<< 2.0.0)\n")  # fmt: skip
        _deb(work, ctk, "nvidia-container-toolkit", deb, rel)
        for n in (
            "nvidia-container-toolkit-base",
            "libnvidia-container-tools",
            "libnvidia-container1",
        ):
            _deb(work, ctk, n, deb)
    doca = root / distro / "doca"
    doca.mkdir(parents=True)
    for v in OFED:
        _deb(work, doca, "mlnx-ofed-all", f"{v}")
    for repo in (cuda, ctk, doca):
        index = subprocess.run(["dpkg-scanpackages", "--multiversion", "."], cwd=repo,
                               check=True, capture_output=True, text=True).stdout  # fmt: skip
        (repo / "Packages").write_text(index)


def build_family_repos(root: Path) -> FamilyRepos:
    """Build every family's FAKE repositories under `root` (which must not exist yet)."""
    work = root.parent / (root.name + ".work")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        _build_el(work, root)
        for distro in UBUNTU:
            _build_ubuntu(work, root, distro)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return FamilyRepos(root)


def cached_family_repos() -> FamilyRepos:
    """The repositories for this builder's content, built once (atomically, by rename)."""
    content = Path(__file__).read_bytes() + guestfamily.RELEASE_SPEC.encode()
    digest = hashlib.sha256(content).hexdigest()[:16]
    final = CACHE_ROOT / f"rackcert-fake-family-repos-{digest}"
    if (final / ".done").is_file():
        return FamilyRepos(final)
    tmp = CACHE_ROOT / f"rackcert-fake-family-repos-{digest}.{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    build_family_repos(tmp)
    (tmp / ".done").write_text("")
    for p in [tmp, *tmp.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    try:
        tmp.rename(final)
    except OSError:  # another worker renamed its copy first: the same content
        shutil.rmtree(tmp, ignore_errors=True)
    return FamilyRepos(final)


@pytest.fixture(scope="session")
def fake_family_repos() -> FamilyRepos:
    return cached_family_repos()
