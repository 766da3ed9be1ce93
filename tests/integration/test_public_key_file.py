"""guest.ssh.public_key_file sends only public keys off the controller (issue "Hardening,
second round", item 6).

The file's lines go into every clone's cloud-init user-data, vCenter's guestinfo and
plan.json, where no redactor sees them: a spec that pointed it at the vCenter password
file sent the password out. Only small files of OpenSSH public key lines are read, and
never one of the spec's secret files.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from provision import guestinfo
from rackcert.core.errors import InputError
from rackcert.core.spec_loader import parse_spec

LAB = Path(__file__).resolve().parents[2] / "inventories" / "lab.yaml"


def _spec(tmp_path: Path, public_key_file: Path):
    password = tmp_path / "vcenter.password"
    password.write_text("correct-horse-battery\n")
    key = tmp_path / "id_ed25519"
    if not key.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    text = (
        LAB.read_text()
        .replace("~/.cache/rackcert/lab/vcenter.password", str(password))
        .replace(
            "key_file: ~/.cache/rackcert/lab/id_ed25519",
            f"key_file: {key}\n    public_key_file: {public_key_file}",
        )
    )
    return parse_spec(text).spec, password, key


def test_a_public_key_file_is_read(tmp_path):
    spec, _password, key = _spec(tmp_path, tmp_path / "id_ed25519.pub")
    assert guestinfo.read_authorized_keys(spec) == [Path(str(key) + ".pub").read_text().strip()]


def test_the_vcenter_password_file_is_never_a_public_key(tmp_path):
    spec, password, _key = _spec(tmp_path, tmp_path / "vcenter.password")
    with pytest.raises(InputError, match="is a secret file of this spec, not a public key"):
        guestinfo.read_authorized_keys(spec)
    link = tmp_path / "innocent.pub"
    link.symlink_to(password)
    spec, _, _ = _spec(tmp_path, link)
    with pytest.raises(InputError, match="secret file of this spec"):
        guestinfo.read_authorized_keys(spec)


def test_only_bounded_openssh_public_key_lines(tmp_path):
    other = tmp_path / "notes.pub"
    other.write_text("# my key\nssh-ed25519 AAAAC3Nza x\nhunter2-is-my-password\n")
    spec, _, _ = _spec(tmp_path, other)
    with pytest.raises(InputError, match=r"public_key_file .*notes.pub:3: not an OpenSSH public"):
        guestinfo.read_authorized_keys(spec)
    private = tmp_path / "copy-of-a-private-key"
    private.write_text((tmp_path / "id_ed25519").read_text())
    spec, _, _ = _spec(tmp_path, private)
    with pytest.raises(InputError, match="not an OpenSSH public key line"):
        guestinfo.read_authorized_keys(spec)
    big = tmp_path / "big.pub"
    big.write_text("ssh-ed25519 " + "A" * 20_000 + "\n")
    spec, _, _ = _spec(tmp_path, big)
    with pytest.raises(InputError, match="larger than 16384 bytes"):
        guestinfo.read_authorized_keys(spec)
