"""Bring your own Ansible, fast: spec fields and CLI options checked without a host.

(The real runs are in test_configure_sources.py and test_configure_collection.py.)
"""

from __future__ import annotations

import pytest
import yaml

from rackcert.configure.inventory import build_inventory
from rackcert.configure.runner import _extra_vars_label
from rackcert.core.errors import InputError
from rackcert.core.spec import Spec
from rackcert.core.spec_loader import load_spec
from tests.support.configure_byo import cli as _cli
from tests.support.configure_byo import one_error_line as _one_error_line
from tests.support.spec_helpers import LAB, R750, example_data, mutated, write_spec


def _guest(**fields):
    def edit(data):
        data["guest"].update(fields)

    return edit


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ({"path": "/srv/MLNX_OFED_LINUX-5.4-3.1.0.0.zip"}, "unpack this file into a repository"),
        ({"path": "/srv/ofed.tar.xz"}, "unpack this file into a repository"),
        ({"path": "srv/ofed"}, "path must be absolute on the node"),
        (
            {"repo_url": "https://x.invalid/r", "key_url": "https://x/k", "key_file": "/k.asc"},
            "give key_url or key_file, not both",
        ),  # fmt: skip
        ({"key_file": "/k.asc"}, "a signing key needs a repo_url or path"),
        ({"repo_url": "https://x.invalid/r", "key_file": "/k.pem"}, "ends in .asc"),
    ],
)
def test_spec_check_refuses_sources_the_roles_cannot_use(tmp_path, source, expected):
    data = mutated(example_data(R750), _guest(sources={"ofed": source}))
    line = _one_error_line(_cli("spec", "check", str(write_spec(tmp_path, data))))
    assert "guest.sources.ofed" in line and expected in line


@pytest.mark.parametrize("kind", ["/srv/ofed/DEBS", "/srv/ofed.tgz", "/srv/OFED.TAR.GZ", "/x.iso"])
def test_spec_check_accepts_directory_tarball_and_iso(tmp_path, kind):
    data = mutated(example_data(R750), _guest(sources={"ofed": {"path": kind}}))
    proc = _cli("spec", "check", str(write_spec(tmp_path, data)))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ansible_vars_reach_the_inventory_as_data_and_may_not_shadow_the_spec(tmp_path):
    wanted = {"mlx_ats_skip_reboot": True, "nvidia_driver_dkms": False, "dl_runtime_mode": "venv"}
    data = mutated(example_data(LAB), _guest(ansible_vars=wanted))
    spec = load_spec(write_spec(tmp_path, data)).spec
    group = build_inventory(spec)["all"]["vars"]
    assert {k: group[k] for k in wanted} == wanted
    # A variable the spec already sets from a field is refused, at its line.
    clash = mutated(data, _guest(ansible_vars={"network_mtu": 1500}))
    path = write_spec(tmp_path, clash, "clash.yaml")
    line = _one_error_line(_cli("spec", "check", str(path)))
    assert f"{path}:" in line and "guest.ansible_vars.network_mtu" in line
    assert "rackcert sets network_mtu from the spec" in line
    bad = mutated(data, _guest(ansible_vars={"not-a-name": 1}))
    line = _one_error_line(_cli("spec", "check", str(write_spec(tmp_path, bad, "bad.yaml"))))
    assert "not an Ansible variable name: 'not-a-name'" in line
    jinja = mutated(data, _guest(ansible_vars={"x": "{{ lookup('pipe', 'id') }}"}))
    line = _one_error_line(_cli("spec", "check", str(write_spec(tmp_path, jinja, "j.yaml"))))
    assert "is not allowed in a spec value" in line


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ansible_ssh_common_args", "-o ProxyCommand='touch /tmp/rackcert-pwned'"),
        ("ansible_connection", "local"),
        ("ansible_ssh_executable", "/tmp/evil"),
        ("ansible_ssh_args", "-o StrictHostKeyChecking=no"),
        ("ansible_ssh_extra_args", "-o UserKnownHostsFile=/dev/null"),
        ("ansible_host_key_checking", False),
        ("ansible_become_exe", "/tmp/evil"),
        ("some_unknown_variable", 1),
    ],
)
def test_ansible_vars_outside_the_roles_defaults_are_refused_at_their_line(tmp_path, name, value):
    """Connection variables run commands on the controller or drop the enrolled host keys."""
    data = mutated(example_data(LAB), _guest(ansible_vars={name: value}))
    path = write_spec(tmp_path, data)
    proc = _cli("spec", "check", str(path))
    assert proc.returncode == 2
    line = _one_error_line(proc)
    assert f"{path}:" in line and f"guest.ansible_vars.{name}" in line
    assert "is not a variable of rackcert's roles" in line
    # A library caller that skips `spec check` gets the same refusal from the inventory.
    with pytest.raises(InputError, match=f"guest.ansible_vars.{name}"):
        build_inventory(Spec.model_validate(data))


@pytest.mark.parametrize("value", ["python3", "../bin/python", 3, "/usr/bin/python3\n-x"])
def test_python_interpreter_must_be_an_absolute_path(tmp_path, value):
    data = mutated(example_data(LAB), _guest(ansible_vars={"ansible_python_interpreter": value}))
    line = _one_error_line(_cli("spec", "check", str(write_spec(tmp_path, data))))
    assert "guest.ansible_vars.ansible_python_interpreter" in line and "absolute path" in line


def test_el8_nodes_get_a_supported_python_unless_the_spec_says_otherwise(tmp_path):
    el8 = mutated(example_data(LAB), _guest(os="rhel-8"))
    spec = load_spec(write_spec(tmp_path, el8)).spec
    assert (
        build_inventory(spec)["all"]["vars"]["ansible_python_interpreter"] == "/usr/bin/python3.11"
    )
    own = mutated(el8, _guest(ansible_vars={"ansible_python_interpreter": "/opt/py/bin/python3"}))
    spec = load_spec(write_spec(tmp_path, own, "own.yaml")).spec
    assert (
        build_inventory(spec)["all"]["vars"]["ansible_python_interpreter"] == "/opt/py/bin/python3"
    )
    lab = load_spec(LAB).spec
    assert "ansible_python_interpreter" not in build_inventory(lab)["all"]["vars"]


def test_extra_vars_are_checked_in_one_line_and_recorded_without_values(tmp_path):
    missing = tmp_path / "nope.yml"
    line = _one_error_line(
        _cli("configure", str(LAB), "-e", f"@{missing}", "--runs-dir", str(tmp_path))
    )
    assert f"--extra-vars @{missing}: no such file" in line
    line = _one_error_line(_cli("configure", str(LAB), "-e", "justaword"))
    assert "give @file.yml, key=value or a YAML/JSON mapping" in line
    assert not list(tmp_path.rglob("configure.json"))
    assert _extra_vars_label("a=1 token=s3cr3t") == "a=... token=..."
    assert _extra_vars_label("@/etc/site.yml") == "@/etc/site.yml"
    assert _extra_vars_label('{"token": "s3cr3t"}') == "(inline YAML/JSON)"


def test_write_inventory_writes_the_same_inventory_and_runs_nothing(tmp_path):
    target = tmp_path / "out" / "rack.yml"
    proc = _cli(
        "configure", str(LAB), "--write-inventory", str(target), "--runs-dir", str(tmp_path)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = target.read_text()
    assert text.startswith("# Generated by rackcert from")
    assert yaml.safe_load(text) == build_inventory(load_spec(LAB).spec)  # what configure uses
    assert not list(tmp_path.rglob("configure.json"))
    line = _one_error_line(_cli("configure", str(LAB), "--write-inventory", "/proc/nope/x.yml"))
    assert "--write-inventory /proc/nope/x.yml" in line


@pytest.mark.parametrize(
    ("component", "source", "expected"),
    [
        (
            "ofed",
            {"path": "/srv/x.run", "sha256": "a" * 64},
            "a .run installer is for nvidia_driver only",
        ),
        (
            "nvidia_driver",
            {"path": "/srv/NVIDIA-Linux-x86_64-550.127.05-grid.run"},
            "needs its sha256",
        ),
        (
            "nvidia_driver",
            {"path": "/srv/g.run", "sha256": "a" * 64, "repo_url": "https://x.invalid/r"},
            "takes path and sha256 only",
        ),  # fmt: skip
    ],
)
def test_spec_check_takes_a_run_installer_for_the_driver_only_with_its_sha256(
    tmp_path, component, source, expected
):
    data = mutated(example_data(R750), _guest(sources={component: source}))
    line = _one_error_line(_cli("spec", "check", str(write_spec(tmp_path, data))))
    assert expected in line, line


def test_a_pinned_run_installer_becomes_the_driver_roles_run_file(tmp_path):
    run = "/srv/nvidia/NVIDIA-Linux-x86_64-550.127.05-grid.run"
    source = {"path": run, "sha256": "AB" * 32}
    data = mutated(example_data(R750), _guest(sources={"nvidia_driver": source}))
    path = write_spec(tmp_path, data)
    assert _cli("spec", "check", str(path)).returncode == 0
    group = build_inventory(load_spec(path).spec)["all"]["vars"]
    assert group["nvidia_driver_run_file"] == run
    assert group["nvidia_driver_run_sha256"] == "ab" * 32
    assert group["nvidia_driver_local_path"] == ""  # not a package source for vendor_package
