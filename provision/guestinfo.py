"""A cloned VM's identity as cloud-init's VMware datasource reads it from guestinfo.

Pure functions. `guestinfo(spec, vm, keys)` returns the extraConfig keys the
datasource reads (cloud-init's DataSourceVMware, "guestinfo" access method):

- `guestinfo.metadata`: YAML with `instance-id`, `local-hostname` and `network`
  (network config version 2: the static address of `vms[].address` with the
  prefix, gateway and DNS of `network.management`);
- `guestinfo.userdata`: a `#cloud-config` document whose user gets the public
  key of `guest.ssh` as an authorized key;
- `guestinfo.metadata.encoding` / `guestinfo.userdata.encoding`: `gzip+base64`,
  one of the encodings the datasource decodes (`decode()`: gzip+base64, gz+b64,
  base64, b64, else plain text).

The values are deterministic (gzip with mtime 0), so a second plan compares
equal and plans nothing. Nothing secret goes in: guestinfo is readable from
inside the guest and by every vCenter user who can read the VM's configuration,
so only public keys and addresses are written. `decode()` is the inverse, the
way the datasource decodes; the lab's guest agent uses it.
"""

from __future__ import annotations

import base64
import gzip
import ipaddress
import json
import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from rackcert.core.errors import InputError
from rackcert.core.spec import Spec, Vm

METADATA = "guestinfo.metadata"
USERDATA = "guestinfo.userdata"
ENCODING = "gzip+base64"
KEYS = (METADATA, f"{METADATA}.encoding", USERDATA, f"{USERDATA}.encoding")
# The management NIC inside the guest: vmxnet3 is named ens192 (and up) by systemd's
# predictable names on vSphere; match by driver so the name does not matter.
NIC_MATCH = {"driver": "vmxnet3"}


def public_key_path(spec: Spec) -> Path | None:
    """Where the guests' authorized key is read from: public_key_file, else key_file.pub."""
    ssh = spec.guest.ssh
    if ssh.public_key_file:
        return Path(ssh.public_key_file).expanduser()
    if ssh.key_file:
        return Path(ssh.key_file + ".pub").expanduser()
    return None


MAX_PUBLIC_KEY_FILE = 16 * 1024  # a few OpenSSH public keys; an RSA-16384 line is ~2.8 KB
# One OpenSSH public key line: [options-free] type, base64 blob, optional comment.
_KEY_LINE = re.compile(
    r"(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp(256|384|521)|sk-(ssh-ed25519|ecdsa-sha2-nistp256)"
    r"@openssh\.com|ssh-ed25519-cert-v01@openssh\.com) [A-Za-z0-9+/]+={0,3}( [ -~]{0,256})?"
)


def _secret_files(spec: Spec) -> list[Path]:
    """The files the spec names as secrets: none of them may be read as a public key."""
    names = [spec.vcenter.password_file, spec.guest.ssh.key_file]
    return [Path(n).expanduser() for n in names if n]


def _read_small(path: Path, where: str) -> str:
    """A regular file's text of at most MAX_PUBLIC_KEY_FILE bytes (a FIFO would hang)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise InputError(f"{where}: not a regular file")
            data = os.read(fd, MAX_PUBLIC_KEY_FILE + 1)
        finally:
            os.close(fd)
    except OSError as exc:
        raise InputError(f"{where}: cannot read: {exc.strerror}") from None
    if len(data) > MAX_PUBLIC_KEY_FILE:
        raise InputError(f"{where}: larger than {MAX_PUBLIC_KEY_FILE} bytes; not a public key")
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        raise InputError(f"{where}: not text; not a public key") from None


def read_authorized_keys(spec: Spec) -> list[str]:
    """The public key lines for the guests; [] when the file is not there (planner says so).

    The file goes to every guest in clear (cloud-init user-data, vCenter guestinfo,
    plan.json), where no redactor can see it. So it is read only when it is a small regular
    file of OpenSSH public key lines, and never when it is one of the spec's secret files
    (a spec pointing public_key_file at the vCenter password file sent the password out).
    """
    path = public_key_path(spec)
    if path is None or not path.is_file():
        return []
    where = f"guest.ssh.public_key_file {spec.guest.ssh.public_key_file or path}"
    for secret in _secret_files(spec):
        if secret.exists() and path.resolve() == secret.resolve():
            raise InputError(f"{where}: is a secret file of this spec, not a public key")
    lines = [line.strip() for line in _read_small(path, where).splitlines()]
    keys = [line for line in lines if line and not line.startswith("#")]
    for number, line in enumerate(lines, 1):
        if line in keys and not _KEY_LINE.fullmatch(line):
            raise InputError(
                f"{where}:{number}: not an OpenSSH public key line (ssh-ed25519 AAAA... comment);"
                " nothing of it is sent to the VMs"
            )
    return keys


def encode(text: str) -> str:
    """gzip+base64, reproducibly (mtime 0), as the datasource's `decode` undoes it."""
    return base64.b64encode(gzip.compress(text.encode(), mtime=0)).decode()


def decode(value: str, encoding: str | None) -> str:
    """The datasource's decoding: gzip+base64 / gz+b64, base64 / b64, else plain text."""
    if encoding in ("gzip+base64", "gz+b64"):
        return gzip.decompress(base64.b64decode(value)).decode()
    if encoding in ("base64", "b64"):
        return base64.b64decode(value).decode()
    return value


def metadata(spec: Spec, vm: Vm) -> dict[str, Any]:
    """instance-id, local-hostname and a static network config v2 for the management NIC."""
    mgmt = spec.network.management
    nic: dict[str, Any] = {
        "match": dict(NIC_MATCH),
        "set-name": "eth0",
        "dhcp4": False,
        "addresses": [f"{vm.address}/{mgmt.prefix}"],
    }
    if mgmt.gateway:
        # cloud-init 22.4 refuses "to: default" (not an IP address); 0.0.0.0/0 is read by all.
        nic["routes"] = [{"to": "0.0.0.0/0", "via": mgmt.gateway}]
    if mgmt.dns or mgmt.search:
        nic["nameservers"] = {"addresses": list(mgmt.dns), "search": list(mgmt.search)}
    return {
        "instance-id": vm.name,
        "local-hostname": vm.name,
        "network": {"version": 2, "ethernets": {"mgmt": nic}},
    }


def userdata(spec: Spec, keys: Sequence[str]) -> str:
    """#cloud-config: the SSH user with its authorized key(s); no password, no secret."""
    user = spec.guest.ssh.user
    doc: dict[str, Any] = {"ssh_pwauth": False}
    if user == "root":
        doc["disable_root"] = False
        doc["ssh_authorized_keys"] = list(keys)
    else:
        doc["users"] = [
            {
                "name": user,
                "ssh_authorized_keys": list(keys),
                "sudo": "ALL=(ALL) NOPASSWD:ALL",
                "shell": "/bin/bash",
                "lock_passwd": True,
            }
        ]
    return "#cloud-config\n" + yaml.safe_dump(doc, sort_keys=True, width=1 << 16)


def guestinfo(spec: Spec, vm: Vm, keys: Sequence[str]) -> dict[str, str]:
    """The four extraConfig keys of cloud-init's VMware datasource for one VM."""
    # JSON (which is YAML too): the datasource's load_json_or_yaml tries JSON first.
    meta = json.dumps(metadata(spec, vm), sort_keys=True, separators=(",", ":"))
    return {
        METADATA: encode(meta),
        f"{METADATA}.encoding": ENCODING,
        USERDATA: encode(userdata(spec, keys)),
        f"{USERDATA}.encoding": ENCODING,
    }


def read_identity(extra_config: dict[str, str]) -> dict[str, Any] | None:
    """Hostname, address/prefix, gateway and authorized keys decoded from a VM's guestinfo.

    None when the VM has no (readable) cloud-init metadata. This is what cloud-init
    would apply in the guest: local-hostname, the first static address of the
    network config, its default route, and the user-data's authorized keys.
    """
    raw = extra_config.get(METADATA)
    if not raw:
        return None
    try:
        meta = yaml.safe_load(decode(raw, extra_config.get(f"{METADATA}.encoding"))) or {}
        user = extra_config.get(USERDATA)
        data = (
            yaml.safe_load(decode(user, extra_config.get(f"{USERDATA}.encoding"))) if user else {}
        )
    except (ValueError, OSError, yaml.YAMLError, UnicodeDecodeError):
        return None
    if not isinstance(meta, dict):
        return None
    data = data if isinstance(data, dict) else {}
    address, prefix, gateway = None, None, None
    for nic in ((meta.get("network") or {}).get("ethernets") or {}).values():
        for cidr in nic.get("addresses") or []:
            iface = ipaddress.ip_interface(cidr)
            address, prefix = str(iface.ip), iface.network.prefixlen
            break
        for route in nic.get("routes") or []:
            if route.get("to") in ("default", "0.0.0.0/0"):
                gateway = route.get("via")
        if address:
            break
    keys = list(data.get("ssh_authorized_keys") or [])
    for user in data.get("users") or []:
        if isinstance(user, dict):
            keys += user.get("ssh_authorized_keys") or []
    return {
        "hostname": meta.get("local-hostname") or meta.get("instance-id"),
        "address": address,
        "prefix": prefix,
        "gateway": gateway,
        "authorized_keys": keys,
    }
