"""The test-host families: what each stand-in claims to be, and a clear error for the rest."""

from __future__ import annotations

import pytest

from rackcert.core.errors import InputError
from rackcert.lab.hostfamily import FAMILIES, describe, family


def test_every_family_says_what_ansible_will_read() -> None:
    el = family("rhel-9")
    assert el.os_family == "RedHat" and el.package_manager == "dnf"
    # Ansible reads /etc/debian_version before os-release's ID: an EL stand-in has none.
    assert "/etc/debian_version" in el.remove
    assert 'PLATFORM_ID="platform:el9"' in el.files["/etc/os-release"]
    for fid in ("ubuntu-22.04", "ubuntu-24.04"):
        fam = family(fid)
        assert fam.os_family == "Debian" and fam.distribution == "Ubuntu"
        assert f'VERSION_ID="{fam.version}"' in fam.files["/etc/os-release"]
        assert f"DISTRIB_RELEASE={fam.version}" in fam.files["/etc/lsb-release"]


def test_a_stand_in_is_never_described_as_the_real_system() -> None:
    for fid in set(FAMILIES) - {"debian-12"}:
        line = describe(family(fid))
        assert "stand-in on Debian 12" in line and "Debian's kernel" in line, line


def test_an_unknown_family_is_one_clear_error() -> None:
    with pytest.raises(InputError, match=r"no test host family 'rhel-8' \(known: debian-12, "):
        family("rhel-8")
