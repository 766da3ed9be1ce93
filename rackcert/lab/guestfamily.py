"""The OS family of the lab's guests: the spec's guest.os, given once, at a VM's first boot.

Why: racks run Ubuntu 22.04/24.04 and RHEL 9 guests, and a spec says which (`guest.os`);
the lab's VMs should be what the spec says, so configure meets the family it will meet on
the rack. The guest agent (rackcert.lab.guest_agent) starts each powered-on VM as a test
host; where guest.os names a family the lab can stand in for (rackcert.lab.hostfamily:
ubuntu-22.04, ubuntu-24.04, rhel-9), the VM's first boot makes that host a stand-in of it,
Debian 12 underneath. `debian-12`, and a family the lab has no stand-in for (ubuntu-20.04,
rhel-8), keep the plain Debian 12 test host, and `lab up` says so in one line.

A VM's family is its disk's, as a VM's OS is its virtual disk's: chosen when the disk is
blank (the first power-on of a clone) and written beside the disk's overlay layers, out of
the guest's view (`rackcert-image`); a later power-on reads it and changes nothing, so what
the roles wrote since (a dnf versionlock, a repository) stays, and a spec edited afterwards
does not turn the VM into another OS (configure then refuses the node, as on a rack). The
stand-in is made before the user's key is authorized, so no login sees it half made; a first
boot cut short before it was made (`rackcert-image.ready` absent) makes it again.

An EL image has its release package in rpm's database (it tells dnf its $releasever through
`system-release(releasever)`; without it dnf says "Unable to detect release version"). The
lab builds one with rpmbuild, once per lab, labelled a stand-in: it owns no file and carries
nothing of Red Hat's.

    fam, line = lab_family(spec.guest.os)    # InputError where the machine lacks the tools
    image = image_of(disk, fam.id if fam else DEBIAN)      # before the host starts
    base = base_rpms(image, cache)                         # built before it starts, once
    give_family(host, image, base)                         # after, before keys are authorized
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from rackcert.core.errors import InputError
from rackcert.lab.hostfamily import FAMILIES, Family, describe, make_family
from rackcert.lab.sshhosts.host import TestHost

DEBIAN = "debian-12"  # the machine's own OS: a plain test host
IMAGE = "rackcert-image"  # on a VM's disk, beside upper/ and work/: the family it was born
# What a stand-in's package manager needs on this machine (Debian's packages of them:
# rpm, dnf, python3-dnf, dnf-plugins-core; .ci/setup installs them).
TOOLS = {"dnf": ("rpm", "rpmbuild", "dnf"), "apt": ("apt-get", "dpkg")}
# RHEL 9.4's redhat-release: its name, version, release and what dnf reads from it.
RELEASE_SPEC = """Name: redhat-release
Version: 9.4
Release: 0.5.el9
Summary: rackcert lab stand-in for RHEL 9's release package (identity only)
License: none
Vendor: rackcert lab (a stand-in, not Red Hat)
Provides: system-release
Provides: system-release(releasever) = 9
Provides: redhat-release-eula
%description
The release package of the rackcert lab's RHEL 9 stand-in guests: tells dnf its releasever.
Debian 12 underneath; nothing of Red Hat's is in it.
%files
"""


def lab_family(
    guest_os: str, *, which: Callable[[str], str | None] = shutil.which
) -> tuple[Family | None, str]:
    """The stand-in family for the spec's guest.os (None: a plain Debian 12 host), and one line
    for `lab up` ("" where there is nothing to say).

    Raises InputError when the family is one the lab stands in for but this machine lacks its
    package manager's tools: a lab that would fail at every VM's boot is refused at `lab up`.
    """
    if guest_os == DEBIAN:
        return None, ""
    fam = FAMILIES.get(guest_os)
    if fam is None:
        known = ", ".join(sorted(FAMILIES))
        return None, (
            f"guest.os {guest_os}: the lab has no stand-in for it (it has {known}); its VMs"
            f" boot as Debian 12 test hosts, which configure refuses for this spec"
        )
    missing = [t for t in TOOLS[fam.package_manager] if which(t) is None]
    if missing:
        raise InputError(
            f"guest.os {guest_os}: the lab's stand-in needs {', '.join(missing)} on this"
            " machine (Debian: apt-get install rpm dnf python3-dnf dnf-plugins-core), or set"
            f" guest.os: {DEBIAN} for plain Debian 12 guests"
        )
    return fam, f"guests: {describe(fam)}"


def image_of(disk: Path | None, wanted: str) -> str:
    """The family a VM's disk holds: `wanted` when the disk is blank, then kept on it.

    A disk that booted before the lab gave families (overlay layers, no record) is Debian 12.
    Without a disk (a tmpfs per boot) every boot is a first boot.
    """
    if disk is None:
        return wanted
    record = disk / IMAGE
    if record.is_file():
        return record.read_text().strip() or DEBIAN
    image = wanted if not (disk / "upper").exists() else DEBIAN
    disk.mkdir(parents=True, exist_ok=True, mode=0o755)
    record.write_text(f"{image}\n")
    return image


def base_rpms(image: str, cache: Path) -> list[Path]:
    """What the image's rpm database holds before any role runs (EL: its release package).

    Built before the host starts, so the time between its sshd answering and its user's key
    being authorized is the stand-in's files and two rpm calls, not an rpmbuild."""
    fam = FAMILIES.get(image)
    return [release_rpm(cache)] if fam is not None and fam.package_manager == "dnf" else []


def give_family(host: TestHost, image: str, base: list[Path]) -> Family | None:
    """Make a started host its disk's family, unless its disk already is (None: Debian 12)."""
    if image not in FAMILIES or image == DEBIAN:
        return None
    ready = host.disk / f"{IMAGE}.ready" if host.disk is not None else None
    if ready is not None and ready.is_file():
        return FAMILIES[image]
    make_family(host, image, base_rpms=base)
    if ready is not None:
        ready.write_text(f"{image}\n")
    return FAMILIES[image]


def release_rpm(cache: Path) -> Path:
    """The stand-in's redhat-release rpm, built with rpmbuild into `cache` the first time."""
    out = cache / "rpms"
    found = sorted(out.glob("redhat-release-*.rpm"))
    if found:
        return found[0]
    work = cache / "rpmbuild"
    work.mkdir(parents=True, exist_ok=True)
    (work / "redhat-release.spec").write_text(RELEASE_SPEC)
    built = subprocess.run(
        ["rpmbuild", "-bb", "--quiet", "--define", f"_topdir {work / 'top'}",
         "--define", f"_rpmdir {work / 'out'}",
         "--define", "_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm",
         str(work / "redhat-release.spec")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    rpms = sorted((work / "out").glob("redhat-release-*.rpm"))
    if built.returncode != 0 or not rpms:
        raise InputError(f"rpmbuild of the lab's redhat-release failed: {built.stderr.strip()}")
    out.mkdir(parents=True, exist_ok=True)
    target = out / rpms[0].name
    shutil.move(str(rpms[0]), target)  # whole, into place: another reader never sees half
    shutil.rmtree(work, ignore_errors=True)
    return target
