"""--versions-from: the versions a configure run recorded before it changed a node, as that
node's variables; a wrong RUN is one error line before anything runs."""

from __future__ import annotations

import json

import pytest

from rackcert.configure.rollback import recorded_versions, versions_host_vars
from rackcert.core.errors import InputError
from tests.support.configure_byo import cli as _cli
from tests.support.configure_byo import one_error_line as _one_error_line
from tests.support.spec_helpers import LAB

BEFORE = {
    "status": "recorded",
    "nvidia_driver": "535.161.08",
    "nvidia_driver_package": "cuda-drivers-535",
    "nvidia_driver_loaded": "535.161.08",
    "container_toolkit": "1.14.3",
    "container_toolkit_package": "nvidia-container-toolkit",
    "ofed": "",
    "reboot_required": [],
}


def _record(tmp_path, hosts):
    run = tmp_path / "run"
    run.mkdir()
    data = {n: {"outcomes": {"rackcert_facts_versions": v}} if v else {} for n, v in hosts.items()}
    (run / "configure.json").write_text(json.dumps({"status": "ok", "data": {"hosts": data}}))
    return run


def test_recorded_versions_become_each_nodes_role_variables(tmp_path):
    run = _record(tmp_path, {"node1": BEFORE, "node2": {**BEFORE, "nvidia_driver": "550.54.15"}})
    assert recorded_versions(run / "configure.json")["node1"]["nvidia_driver"] == "535.161.08"
    got = versions_host_vars(run, ["node2"])
    assert got == {
        "node2": {
            "nvidia_driver_version": "550.54.15",
            "nvidia_driver_package": "cuda-drivers-535",
            "container_toolkit_version": "1.14.3",
            "container_toolkit_package": "nvidia-container-toolkit",
        }
    }  # the empty OFED is left to the spec


def test_a_record_without_versions_for_the_nodes_is_an_input_error(tmp_path):
    run = _record(tmp_path, {"node1": None})
    with pytest.raises(InputError, match="no recorded versions for node1"):
        versions_host_vars(run, ["node1"])
    with pytest.raises(InputError, match="no configure.json there"):
        versions_host_vars(tmp_path / "nowhere", ["node1"])
    (tmp_path / "bad.json").write_text("[]")
    with pytest.raises(InputError, match="not a configure record"):
        versions_host_vars(tmp_path / "bad.json", ["node1"])


def test_cli_refuses_a_wrong_run_in_one_line(tmp_path):
    line = _one_error_line(_cli("configure", str(LAB), "--versions-from", str(tmp_path)))
    assert f"--versions-from {tmp_path}: no configure.json there" in line
