"""A roll trusts only the rack's enrolled host keys (issue 52, item 1), on a real sshd test host.

The roll's guest and certifier ports are the real ones (rackcert.rollout.ConfigureGuest: the
roles limited to the node, in a run nested in the roll's; ValidateCertifier: the node's
validate and per-node stage); its power-on goes through HostKeyGate, which waits until SSH
answers with the enrolled key. Slurm and vCenter are the in-memory models
(tests/support/upgrade_models.py): the node's sshd stays up, as a VM's does across its host's
maintenance, and its "power-on" is where a test re-keys it.

Before: every stage of a roll took `<run>/../known_hosts` as the rack's file, which for a
node's run nested in the roll's is `<roll>/nodes/<node>/known_hosts`, filled on first contact;
whatever answered at a node's address was trusted.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from rackcert.core.runs import RunDir
from rackcert.core.spec_loader import load_spec
from rackcert.rollout import ConfigureGuest, HostKeyGate, ValidateCertifier
from rackcert.upgrade.machine import Ports, Roll
from tests.support.host_keys import rekey as _rekey
from tests.support.plugins.configure import spec_for_hosts
from tests.support.upgrade_helpers import TIMING, make_plan
from tests.support.upgrade_models import SimClock, SimHostImage, SimSlurm, SimVcenter

pytestmark = pytest.mark.integration


class _Rack:
    def __init__(self, ssh_hosts, tmp_path: Path, *, enrolled: bool = True):
        (self.host,) = ssh_hosts(["n1"])
        self.before = spec_for_hosts([self.host], tmp_path / "v1")
        data = yaml.safe_load(self.before.text)
        data["guest"]["nvidia_driver"] = "470.141.03"
        new_path = tmp_path / "v2.yaml"
        new_path.write_text(yaml.safe_dump(data, sort_keys=False))
        self.after = load_spec(new_path)
        self.runs = tmp_path / "runs"
        rack = self.before.spec.metadata.name
        self.certified = RunDir.create(self.runs, rack, self.before.sha256, self.before.text)
        self.known_hosts = self.runs / rack / "known_hosts"
        if enrolled:
            shutil.copy(self.host.known_hosts, self.known_hosts)
        self.enrolled = self.known_hosts.read_bytes() if enrolled else None
        self.roll_run = RunDir.create(self.runs, rack, self.after.sha256, self.after.text)

    def roll(self, on_power_on=None):
        clock = SimClock()
        slurm = SimSlurm(clock, ["n1"])
        slurm.stream = False
        esx = self.before.spec.vms[0].host
        vc = SimVcenter(clock, slurm, {"n1": esx}, {"esxi": "7.0.3"})
        if on_power_on is not None:
            inner = vc.power_on

            def power_on(vm: str) -> None:
                inner(vm)
                on_power_on()

            vc.power_on = power_on  # type: ignore[method-assign]
        ports = Ports(
            slurm,
            HostKeyGate(vc, self.after.spec, self.runs, timeout=20),
            ConfigureGuest(self.after, self.before, self.roll_run, self.runs, tags=("ssh_trust",)),
            ValidateCertifier(
                self.after,
                self.before,
                self.certified,
                self.roll_run,
                self.runs,
                remote_python="python3",
            ),
            SimHostImage(vc),
            clock,
        )
        plan = make_plan(self.before.spec, self.after.spec)
        out = Roll(plan, self.roll_run, ports, TIMING).run()
        return out, slurm

    def stray_files(self) -> list[Path]:
        return sorted(self.roll_run.path.rglob("known_hosts"))


def test_a_roll_of_one_node_uses_the_racks_file_and_leaves_none_under_its_run(ssh_hosts, tmp_path):
    rack = _Rack(ssh_hosts, tmp_path)
    out, _ = rack.roll()
    assert rack.stray_files() == [], "a known_hosts was made under the roll's run"
    assert rack.known_hosts.read_bytes() == rack.enrolled, "a roll enrolled a key"
    node_runs = sorted((rack.roll_run.path / "nodes" / "n1").iterdir())
    configured = [p for p in node_runs if (p / "configure.json").is_file()]
    validated = [p for p in node_runs if (p / "validate.json").is_file()]
    assert configured and validated, [p.name for p in node_runs]
    for path in configured:
        keys = RunDir.open(path).read_stage("configure")["data"]["host_keys"]
        assert keys == {"known_hosts": str(rack.known_hosts), "pinned": False, "enrolled": []}
        assert RunDir.open(path).meta["within"] == rack.roll_run.path.name
    for path in validated:
        keys = RunDir.open(path).read_stage("validate")["data"]["host_keys"]
        assert keys["known_hosts"] == str(rack.known_hosts) and keys["enrolled"] == []
    steps = {s.step: s for s in out.nodes[0].steps}
    assert steps["power on"].detail.startswith("SSH answers with the enrolled host key")
    assert steps["guest layer"].status == "done", steps["guest layer"].detail


def test_a_node_answering_with_another_key_after_power_on_fails_and_stays_drained(
    ssh_hosts, tmp_path
):
    rack = _Rack(ssh_hosts, tmp_path)
    out, slurm = rack.roll(on_power_on=lambda: _rekey(rack.host))
    node = out.nodes[0]
    assert node.state == "failed", node.reason
    assert "power on: host key of n1 changed since enrolment:" in node.reason, node.reason
    assert slurm.table["n1"].drain and slurm.table["n1"].reason == node.reason
    assert "guest layer" not in [s.step for s in node.steps], "configure ran on an impostor"
    assert rack.known_hosts.read_bytes() == rack.enrolled
    assert rack.stray_files() == []


def test_a_node_never_enrolled_is_not_enrolled_by_the_roll(ssh_hosts, tmp_path):
    rack = _Rack(ssh_hosts, tmp_path, enrolled=False)
    out, slurm = rack.roll()
    node = out.nodes[0]
    assert node.state == "failed", node.reason
    assert slurm.table["n1"].drain
    assert not rack.known_hosts.exists(), "the roll enrolled the node"
    assert rack.stray_files() == []
