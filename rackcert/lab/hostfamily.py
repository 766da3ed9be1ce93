"""A test host's OS family: Debian 12 as the machine is, or an Ubuntu or RHEL 9 stand-in.

Why: racks run Ubuntu 22.04/24.04 and RHEL 9 guests (NVIDIA AI Enterprise certifies those),
so every role must run its Ubuntu and EL task files against those families' real package
managers. No Ubuntu or EL image can be had on this Debian machine, but their package
managers can: Debian 12 ships apt (Ubuntu's), and dnf 4.14, rpm 4.18, libdnf, libmodulemd
and dnf-plugins-core (RHEL 9's versions). A family stand-in is a test host
(rackcert.lab.sshhosts) whose /etc, /usr and /var overlays are given the family's identity
and package databases:

- identity: /etc/os-release (and /etc/lsb-release on Ubuntu; /etc/redhat-release and
  /etc/system-release on EL, with /etc/debian_version removed), so Ansible's facts say
  distribution Ubuntu or RedHat, the version and os_family Debian or RedHat;
- EL: rpm's own database at /var/lib/rpm (Debian's rpm keeps a per-user one otherwise), empty
  but for what the caller installs into it (the base image's release package), and dnf with
  /etc/yum.repos.d, module metadata (PLATFORM_ID platform:el9, as RHEL's os-release says) and
  the versionlock plugin; Debian's "local" dnf plugin, which RHEL does not have, is off;
- the family's configuration directories where the roles write (/etc/sysconfig on EL,
  /etc/netplan on Ubuntu, /etc/ssh/sshd_config.d, /etc/munge, /etc/slurm).

What stays Debian underneath: the kernel, the binaries on disk (sshd, chrony, munge, slurmd,
python3) and dpkg's database of them. A stand-in is never reported as RHEL: `describe()` says
what it is built from, and its package manager answers as itself (`rpm -qa` lists only what
was installed through rpm or dnf). docs/lab.md says the same for readers.

    host = start_hosts(["n1"], subnet, key)[0]
    make_family(host, "rhel-9")            # before any role runs
    host.exec(["rpm", "-q", "redhat-release"])
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rackcert.core.errors import InputError
from rackcert.lab.sshhosts.common import SshHostError
from rackcert.lab.sshhosts.host import TestHost


@dataclass(frozen=True)
class Family:
    """One guest OS family a test host can stand in for."""

    id: str  # the spec's guest.os value (ubuntu-22.04, rhel-9)
    os_family: str  # Ansible's ansible_facts.os_family
    distribution: str  # Ansible's ansible_facts.distribution
    version: str  # Ansible's ansible_facts.distribution_version
    package_manager: str  # apt or dnf: what installs the roles' packages
    files: dict[str, str] = field(default_factory=dict)
    remove: tuple[str, ...] = ()
    dirs: tuple[str, ...] = ()


# Ubuntu's own files (Ubuntu 22.04.4 and 24.04 images: /etc/os-release is a link to
# /usr/lib/os-release with these keys; /etc/lsb-release is written by base-files).
def _ubuntu(version: str, codename: str, point: str) -> Family:
    pretty = f"Ubuntu {point} LTS"
    os_release = (
        f'PRETTY_NAME="{pretty}"\nNAME="Ubuntu"\nVERSION_ID="{version}"\n'
        f'VERSION="{point} LTS ({codename.title()} ...)"\nVERSION_CODENAME={codename}\n'
        f"ID=ubuntu\nID_LIKE=debian\nUBUNTU_CODENAME={codename}\n"
    )
    lsb = (
        f"DISTRIB_ID=Ubuntu\nDISTRIB_RELEASE={version}\nDISTRIB_CODENAME={codename}\n"
        f'DISTRIB_DESCRIPTION="{pretty}"\n'
    )
    return Family(
        id=f"ubuntu-{version}",
        os_family="Debian",
        distribution="Ubuntu",
        version=version,
        package_manager="apt",
        files={
            "/etc/os-release": os_release,
            "/etc/lsb-release": lsb,
            # Ubuntu's base-files writes the Debian release it is based on, as a codename.
            "/etc/debian_version": "trixie/sid\n" if version >= "24" else "bookworm/sid\n",
        },
        # The machine's Debian sources: an Ubuntu node has its own archive, unreachable here.
        remove=("/etc/apt/sources.list.d/debian.sources",),
        dirs=("/etc/netplan", "/etc/ssh/sshd_config.d", "/etc/apt/keyrings"),
    )


# RHEL 9's files (redhat-release-9.4 package: /etc/os-release, /etc/redhat-release and
# /etc/system-release; PLATFORM_ID is what dnf matches module streams' platform against).
_RHEL9_OS_RELEASE = (
    'NAME="Red Hat Enterprise Linux"\nVERSION="9.4 (Plow)"\nID="rhel"\nID_LIKE="fedora"\n'
    'VERSION_ID="9.4"\nPLATFORM_ID="platform:el9"\n'
    'PRETTY_NAME="Red Hat Enterprise Linux 9.4 (Plow)"\nANSI_COLOR="0;31"\n'
    'CPE_NAME="cpe:/o:redhat:enterprise_linux:9::baseos"\n'
)
_RHEL9_RELEASE = "Red Hat Enterprise Linux release 9.4 (Plow)\n"

FAMILIES: dict[str, Family] = {
    "debian-12": Family("debian-12", "Debian", "Debian", "12", "apt"),
    "ubuntu-22.04": _ubuntu("22.04", "jammy", "22.04.4"),
    "ubuntu-24.04": _ubuntu("24.04", "noble", "24.04"),
    "rhel-9": Family(
        id="rhel-9",
        os_family="RedHat",
        distribution="RedHat",
        version="9.4",
        package_manager="dnf",
        files={
            "/etc/os-release": _RHEL9_OS_RELEASE,
            "/etc/redhat-release": _RHEL9_RELEASE,
            "/etc/system-release": _RHEL9_RELEASE,
            # rpm's database where RHEL keeps it (Debian's rpm defaults to ~/.rpmdb).
            "/etc/rpm/macros.dbpath": "%_dbpath /var/lib/rpm\n",
            # RHEL has no "local" plugin; Debian's fails without its directory.
            "/etc/dnf/plugins/local.conf": "[main]\nenabled = false\n",
            "/etc/dnf/dnf.conf": (
                "[main]\ngpgcheck=1\ninstallonly_limit=3\nclean_requirements_on_remove=True\n"
                "best=True\nskip_if_unavailable=False\nreposdir=/etc/yum.repos.d\n"
                "module_platform_id=platform:el9\n"
            ),
            "/etc/dnf/plugins/versionlock.list": "",
        },
        # Ansible reads /etc/debian_version before os-release's ID: a RHEL host has none.
        remove=("/etc/debian_version", "/etc/lsb-release"),
        dirs=(
            "/etc/yum.repos.d",
            "/etc/sysconfig",
            "/etc/pki/rpm-gpg",
            "/var/lib/rpm",
            "/etc/ssh/sshd_config.d",
        ),
    ),
}


def family(family_id: str) -> Family:
    """The family a spec's guest.os names; a clear error for one no test host can be."""
    try:
        return FAMILIES[family_id]
    except KeyError:
        known = ", ".join(sorted(FAMILIES))
        raise InputError(f"no test host family {family_id!r} (known: {known})") from None


def make_family(host: TestHost, family_id: str, *, base_rpms: Sequence[Path] = ()) -> Family:
    """Give a running test host the family's identity and package databases.

    `base_rpms` (EL only): packages of the family's base image installed with rpm itself
    before any role runs (the release package that tells dnf its $releasever).
    Only the host's own overlays are written; the machine is untouched.
    """
    fam = family(family_id)
    for d in fam.dirs:
        host.path(d).mkdir(parents=True, exist_ok=True)
    for path in fam.remove:
        target = host.path(path)
        if target.is_symlink() or target.exists():
            target.unlink()
    for path, text in fam.files.items():
        target = host.path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink():
            target.unlink()  # Debian's /etc/os-release links into /usr/lib
        target.write_text(text)
    if fam.package_manager == "dnf":
        _rpm(host, ["rpm", "--initdb"])
        if base_rpms:
            stage = host.path("/var/tmp/rackcert-base-rpms")
            stage.mkdir(parents=True, exist_ok=True)
            for rpm in base_rpms:
                shutil.copy(rpm, stage / Path(rpm).name)
            names = [f"/var/tmp/rackcert-base-rpms/{Path(r).name}" for r in base_rpms]
            _rpm(host, ["rpm", "-i", "--nodeps", *names])
            shutil.rmtree(stage, ignore_errors=True)
    return fam


def _rpm(host: TestHost, argv: list[str]) -> None:
    out = host.exec(argv, timeout=60)
    if out.returncode != 0:
        raise SshHostError(f"{host.name}: {' '.join(argv)} failed: {out.stderr.strip()}")


def describe(fam: Family) -> str:
    """One line for reports: what the stand-in is built from, never just 'RHEL'."""
    if fam.id == "debian-12":
        return "Debian 12 test host"
    return (
        f"{fam.id} stand-in on Debian 12 ({fam.distribution} {fam.version} identity,"
        f" {fam.package_manager} for packages; Debian's kernel and binaries underneath)"
    )
