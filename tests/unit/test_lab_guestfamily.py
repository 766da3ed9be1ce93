"""The lab's guest families: which guest.os the lab stands in for, and a VM's disk keeps its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from rackcert.core.errors import InputError
from rackcert.lab.guestfamily import DEBIAN, IMAGE, image_of, lab_family


def test_a_family_the_lab_cannot_stand_in_for_is_one_line_and_debian() -> None:
    fam, line = lab_family("rhel-8")
    assert fam is None
    assert line == (
        "guest.os rhel-8: the lab has no stand-in for it (it has debian-12, rhel-9,"
        " ubuntu-22.04, ubuntu-24.04); its VMs boot as Debian 12 test hosts, which configure"
        " refuses for this spec"
    )
    assert lab_family(DEBIAN) == (None, "")


def test_a_stand_in_is_named_as_one_and_needs_its_tools() -> None:
    fam, line = lab_family("rhel-9", which=lambda tool: f"/usr/bin/{tool}")
    assert fam is not None and fam.id == "rhel-9"
    assert line.startswith("guests: rhel-9 stand-in on Debian 12 (RedHat 9.4 identity"), line
    with pytest.raises(InputError) as err:
        lab_family("rhel-9", which=lambda tool: None if tool == "dnf" else f"/usr/bin/{tool}")
    assert str(err.value).startswith(
        "guest.os rhel-9: the lab's stand-in needs dnf on this machine"
    )
    assert "\n" not in str(err.value)


def test_a_disk_is_the_family_it_was_born(tmp_path: Path) -> None:
    blank = tmp_path / "blank"
    assert image_of(blank, "rhel-9") == "rhel-9"
    (blank / "upper").mkdir()  # it booted
    assert image_of(blank, "ubuntu-24.04") == "rhel-9"  # the spec changed, the disk did not
    assert (blank / IMAGE).read_text() == "rhel-9\n"
    # A disk that booted before the lab gave families was Debian 12, and stays it.
    older = tmp_path / "older"
    (older / "upper" / "etc").mkdir(parents=True)
    assert image_of(older, "rhel-9") == DEBIAN
    assert image_of(None, "ubuntu-22.04") == "ubuntu-22.04"  # no disk: every boot is a first
