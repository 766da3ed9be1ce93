"""Cloud-init guestinfo of a cloned VM, judged by cloud-init itself (Debian's cloud-init).

The user-data goes through `cloud-init schema --config-file`; the metadata and
its encoding go through the VMware datasource's own `decode`,
`load_json_or_yaml` and `process_metadata`, and the network config through
cloud-init's network-state parser, run by the system Python that carries the
cloudinit package.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from provision import guestinfo
from rackcert.core.spec_loader import parse_spec as load_text
from tests.support.plugins.guestinfo import KEY, LAB

SYSTEM_PYTHON = "/usr/bin/python3"

_DATASOURCE = r"""
import json, sys
from cloudinit.sources import DataSourceVMware as ds
from cloudinit.net import network_state
extra = json.load(sys.stdin)
meta = ds.load_json_or_yaml(ds.decode("metadata", extra["guestinfo.metadata.encoding"],
                                      extra["guestinfo.metadata"]))
meta = ds.process_metadata(meta)
user = ds.decode("userdata", extra["guestinfo.userdata.encoding"], extra["guestinfo.userdata"])
state = network_state.parse_net_config_data(meta["network"]["config"])
ifaces = [{"name": i["name"], "subnets": i["subnets"]} for i in state.iter_interfaces()]
print(json.dumps({"meta": {k: v for k, v in meta.items() if k != "network"},
                  "ifaces": ifaces, "user": user}, default=str))
"""


def _cloud_init(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), input=stdin, capture_output=True, text=True, timeout=120)


def test_userdata_passes_cloud_inits_schema_validator(lab, tmp_path):
    path = tmp_path / "user-data"
    path.write_text(guestinfo.userdata(lab, [KEY]))
    proc = _cloud_init("cloud-init", "schema", "--config-file", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Valid cloud-config" in proc.stdout
    assert "deprecat" not in (proc.stdout + proc.stderr).lower()


def test_the_validator_would_catch_a_broken_userdata(tmp_path):
    path = tmp_path / "user-data"
    path.write_text("#cloud-config\nssh_authorized_keys: 5\n")
    proc = _cloud_init("cloud-init", "schema", "--config-file", str(path))
    assert proc.returncode != 0


def test_non_root_user_gets_its_key_and_passes_the_validator(tmp_path):
    spec = load_text(LAB.read_text().replace("    user: root", "    user: ubuntu")).spec
    path = tmp_path / "user-data"
    path.write_text(guestinfo.userdata(spec, [KEY]))
    proc = _cloud_init("cloud-init", "schema", "--config-file", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert guestinfo.read_identity(guestinfo.guestinfo(spec, spec.vms[0], [KEY]))[
        "authorized_keys"
    ] == [KEY]


def test_vmware_datasource_decodes_the_guestinfo_keys(lab):
    extra = guestinfo.guestinfo(lab, lab.vms[0], [KEY])
    assert set(extra) == set(guestinfo.KEYS)
    assert extra["guestinfo.metadata.encoding"] == "gzip+base64"
    proc = _cloud_init(SYSTEM_PYTHON, "-c", _DATASOURCE, stdin=json.dumps(extra))
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["meta"]["local-hostname"] == "lab-node1"
    assert seen["meta"]["instance-id"] == "lab-node1"
    (iface,) = seen["ifaces"]
    assert iface["name"] == "eth0"
    (subnet,) = iface["subnets"]
    assert subnet["type"] == "static"
    assert subnet["address"] == "10.77.0.11/24" or (
        subnet["address"] == "10.77.0.11" and str(subnet.get("prefix")) == "24"
    )
    assert any(r.get("gateway") == "10.77.0.1" for r in subnet.get("routes", []))
    assert subnet.get("dns_nameservers") == ["10.77.0.2"]
    assert seen["user"].startswith("#cloud-config") and KEY in seen["user"]


def test_nothing_secret_goes_into_guestinfo(lab, tmp_path):
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    spec = load_text(LAB.read_text().replace("~/.cache/rackcert/lab/id_ed25519", str(key))).spec
    keys = guestinfo.read_authorized_keys(spec)
    assert keys == [Path(str(key) + ".pub").read_text().strip()]
    extra = guestinfo.guestinfo(spec, spec.vms[0], keys)
    decoded = "".join(
        guestinfo.decode(extra[k], extra[f"{k}.encoding"])
        for k in (guestinfo.METADATA, guestinfo.USERDATA)
    )
    private = [ln for ln in key.read_text().splitlines() if "PRIVATE KEY" not in ln]
    assert all(line not in decoded for line in private)
    assert "password" not in decoded.lower().replace("ssh_pwauth", "")
