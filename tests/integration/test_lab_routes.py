"""Commands on the lab spec send nothing off the machine (issue "Hardening, second round",
item 9).

With the lab down, the lab's addresses route through the default gateway like any other,
and a command on the lab spec opened SSH connections to the outside network. Commands that
reach the VMs now ask the kernel first: the route must be the bridge of the address's /24.
The test spec moves the lab's VMs to 10.250.77.0/24, a net no test host claims, so the
refusal holds whether or not someone's lab is up on this machine.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rackcert.core.errors import InputError
from rackcert.core.spec_loader import parse_spec
from rackcert.lab.routes import require_lab_up
from rackcert.lab.sshhosts.common import SshHostError
from tests.support.plugins.configure import spec_for_hosts

LAB = Path(__file__).resolve().parents[2] / "inventories" / "lab.yaml"


def _down_lab_spec(tmp_path: Path) -> Path:
    path = tmp_path / "lab.yaml"
    path.write_text(LAB.read_text().replace("10.77.0.", "10.250.77."))
    return path


def test_the_lab_spec_is_refused_while_its_bridge_does_not_route(tmp_path):
    spec = parse_spec(_down_lab_spec(tmp_path).read_text()).spec
    with pytest.raises(InputError, match=r"^the lab is not up: rackcert lab up") as caught:
        require_lab_up(spec)
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("command", [["validate"], ["configure"], ["bench"]])
def test_commands_on_a_down_lab_say_so_and_exit_2(tmp_path, command):
    spec = _down_lab_spec(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "rackcert.cli", *command, str(spec)],
        capture_output=True,
        text=True,
        env={**os.environ, "RACKCERT_RUNS_DIR": str(tmp_path / "runs"), "COLUMNS": "200"},
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("error: the lab is not up: rackcert lab up")
    assert not (tmp_path / "runs").exists()  # refused before any run or connection


def test_test_hosts_connect_only_through_their_own_bridge(ssh_hosts, tmp_path):
    (host,) = ssh_hosts(["node1"])
    require_lab_up(spec_for_hosts([host], tmp_path).spec)  # a test net routed by its bridge
    assert host.ssh("true").returncode == 0
    stray = dataclasses.replace(host, bridge="rcbfafafa")
    assert not stray.reachable()
    with pytest.raises(SshHostError, match="is not routed through its bridge rcbfafafa"):
        stray.ssh("true")
