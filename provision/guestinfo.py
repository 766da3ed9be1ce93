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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from rackcert.spec import Spec, Vm

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


def read_authorized_keys(spec: Spec) -> list[str]:
    """The public key lines for the guests; [] when the file is not there (planner says so)."""
    path = public_key_path(spec)
    if path is None or not path.is_file():
        return []
    lines = [line.strip() for line in path.read_text().splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


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
