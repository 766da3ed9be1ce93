"""The roll's Scheduler port over a real Slurm (Debian's slurmctld/slurmd 22.05 in network
namespaces, tests/support/plugins/slurm.py): DRAINING until the node's job ends, then DRAINED; an
operator's drain told apart from the roll's; and a roll of both nodes with jobs submitted
before and during it, none lost, never more than one node out (sinfo sampled).

vCenter and the guests are in-memory here (the twin's ports are tested on their own); what
this proves is the roll against Slurm's real state machine and job placement.
"""

from __future__ import annotations

import copy
import re
import threading
import time

import pytest
import yaml

from rackcert.core.spec_loader import parse_spec
from rackcert.upgrade.budget import Budget
from rackcert.upgrade.machine import Ports, Roll, Timing
from rackcert.upgrade.plan import PlanOptions, build_plan
from rackcert.upgrade.ports import Certificate, NodeState, RealClock
from rackcert.upgrade.slurm import SlurmScheduler
from tests.support.plugins.slurm import SlurmRack


def _state(slurm: SlurmScheduler, node: str) -> NodeState:
    return slurm.nodes([node])[node]


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _sbatch(rack: SlurmRack, *args: str) -> str:
    out = rack.lab.client("sbatch", "--parsable", "--output=/dev/null", *args, timeout=20)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().split(";")[0]


def _job_states(rack: SlurmRack, ids: list[str]) -> dict[str, str]:
    out = {}
    for job in ids:
        text = rack.lab.scontrol("show", "job", "-o", job).stdout
        match = re.search(r"\bJobState=(\S+)", text)
        out[job] = match.group(1) if match else "GONE"
    return out


def test_draining_becomes_drained_when_the_job_ends(slurm_rack: SlurmRack):
    rack = slurm_rack
    slurm = SlurmScheduler(rack.lab.env())
    try:
        job = _sbatch(rack, "-w", "node1", "-N1", "--wrap", "sleep 3")
        _wait(lambda: _state(slurm, "node1").jobs > 0, 20, "the job to start")
        slurm.drain("node1", "rackcert upgrade R1")
        state = _state(slurm, "node1")
        assert state.draining and not state.drained, state
        assert state.drained_by("R1") and not state.operator_drained("R1")
        _wait(lambda: _state(slurm, "node1").drained, 30, "node1 DRAINED")
        assert _job_states(rack, [job]) == {job: "COMPLETED"}
        slurm.drain("node2", "disk swap, ops ticket 12")
        assert _state(slurm, "node2").operator_drained("R1")
        slurm.set_reason("node1", "rackcert upgrade R1: gpu.count fail")
        state = _state(slurm, "node1")
        assert state.drained and state.reason == "rackcert upgrade R1: gpu.count fail"
    finally:
        for node in ("node1", "node2"):
            slurm.resume(node)
    # Right after a resume slurmctld may show IDLE+NOT_RESPONDING until slurmd answers its
    # next ping (seen here under load); Slurm places no job there meanwhile, nor does the roll.
    _wait(
        lambda: all(s.in_service for s in slurm.nodes(["node1", "node2"]).values()),
        60,
        "both nodes back in service",
    )


class _Vcenter:
    """Immediate power operations; a VM shut down while Slurm runs a job on it is a lost
    job, recorded (the assertion the roll must never trip)."""

    def __init__(self, slurm: SlurmScheduler, hosts: dict[str, str]):
        self.slurm, self.hosts = slurm, hosts
        self.power = dict.fromkeys(hosts, "poweredOn")
        self.lost: list[str] = []

    def power_state(self, vm):
        return self.power[vm]

    def shutdown_guest(self, vm):
        if self.slurm.jobs(vm):
            self.lost.append(vm)
        self.power[vm] = "poweredOff"

    def power_off(self, vm):
        self.power[vm] = "poweredOff"

    def power_on(self, vm):
        self.power[vm] = "poweredOn"

    def enter_maintenance(self, host, run):
        raise AssertionError("no host layer in this roll")

    exit_maintenance = reboot = enter_maintenance

    def marked_hosts(self):
        return []

    def boot_time(self, host):
        return "2026-12-06T10:00:00Z"


class _Guests:
    def __init__(self, versions):
        self.versions = {n: dict(versions) for n in ("node1", "node2")}
        self.first = dict(versions)
        self.half_rate: set[str] = set()

    def apply(self, node, versions):
        time.sleep(0.5)
        self.versions[node].update(versions)

    def baseline(self, nodes):
        return {n: self.certify(n, {}) for n in nodes}

    def certify(self, node, versions):
        slow = node in self.half_rate and self.versions[node] != self.first
        return Certificate(
            versions=dict(self.versions[node]),
            checks={"gpu.count": "pass"},
            figures={"node.compute": 50.0 if slow else 100.0},
        )


def test_a_roll_under_real_slurm_loses_no_job_and_keeps_the_budget(slurm_rack: SlurmRack, tmp_path):
    from tests.support.upgrade_helpers import new_run

    rack = slurm_rack
    before = rack.loaded.spec
    data = yaml.safe_load(rack.loaded.text)
    new = copy.deepcopy(data)
    new["guest"]["nvidia_driver"] = "470.141.03"
    after = parse_spec(yaml.safe_dump(new), "new.yaml").spec
    slurm = SlurmScheduler(rack.lab.env())
    names = [v.name for v in before.vms]
    plan = build_plan(
        before,
        after,
        PlanOptions(Budget.parse("1"), allow_uncertified=True),
        certified_run="certified",
        reference=None,
        matrix_where="-",
        states=slurm.nodes(names),
    )
    assert [[u.host for u in w] for w in plan.waves] == [[u.host] for u in plan.units]
    guests = _Guests({"nvidia_driver": before.guest.nvidia_driver or ""})
    vc = _Vcenter(slurm, {v.name: v.host for v in before.vms})
    run = new_run(tmp_path, new)
    ports = Ports(slurm, vc, guests, guests, None, RealClock())  # type: ignore[arg-type]
    timing = Timing(drain_timeout=60, shutdown_timeout=5, poll=0.2)
    jobs = [_sbatch(rack, "-N1", "--wrap", "sleep 2") for _ in range(3)]
    jobs.append(_sbatch(rack, "-N2", "--wrap", "srun sleep 1"))  # multi-node
    stop, out_seen = threading.Event(), []

    def stream():  # short jobs, single- and multi-node, all through the roll
        while not stop.is_set():
            jobs.append(_sbatch(rack, "-N1", "--wrap", "sleep 1"))
            if len(jobs) % 3 == 0:
                jobs.append(_sbatch(rack, "-N2", "--wrap", "srun sleep 1"))
            time.sleep(0.3)

    def sample():  # the nodes out of service as sinfo shows them, as often as it answers
        while not stop.is_set():
            lines = rack.lab.client("sinfo", "-h", "-N", "-o", "%N %t").stdout.split("\n")
            states = dict(line.split()[:2] for line in lines if len(line.split()) >= 2)
            out_seen.append(
                {n for n, s in states.items() if s.startswith(("drain", "drng", "down"))}
            )
            time.sleep(0.05)

    threads = [threading.Thread(target=f, daemon=True) for f in (stream, sample)]
    for t in threads:
        t.start()
    try:
        result = Roll(plan, run, ports, timing).run()
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        for node in names:
            if slurm.nodes([node])[node].drain:
                slurm.resume(node)
    assert result.status == "done", result.stopped_because
    assert [n.state for n in result.nodes] == ["resumed", "resumed"]
    assert all(v["nvidia_driver"] == "470.141.03" for v in guests.versions.values())
    assert vc.lost == []
    # Never more than one node out (the budget), and the sampling saw the roll take one out.
    assert max(len(out) for out in out_seen) == 1, out_seen
    _wait(lambda: all(s in ("COMPLETED",) for s in _job_states(rack, jobs).values()), 90, "jobs")
    ends = _job_states(rack, jobs)
    assert set(ends.values()) == {"COMPLETED"}, ends


class Killed(BaseException):
    """The controller dies here: nothing after it runs."""


def test_a_planted_failure_stays_drained_and_a_killed_roll_finishes(slurm_rack, tmp_path):
    from rackcert.core.runs import RunDir
    from tests.support.upgrade_helpers import new_run

    rack = slurm_rack
    before = rack.loaded.spec
    new = yaml.safe_load(rack.loaded.text)
    new["guest"]["nvidia_driver"] = "470.141.03"
    after = parse_spec(yaml.safe_dump(new), "new.yaml").spec
    slurm = SlurmScheduler(rack.lab.env())
    names = [v.name for v in before.vms]
    opts = PlanOptions(Budget.parse("1"), allow_uncertified=True)
    plan = build_plan(before, after, opts, certified_run="c", reference=None,
                      matrix_where="-", states=slurm.nodes(names))  # fmt: skip
    timing = Timing(drain_timeout=60, shutdown_timeout=5, poll=0.2)
    try:
        # node1 comes back at half its compute rate: it stays drained, node2 is never touched.
        guests = _Guests({"nvidia_driver": before.guest.nvidia_driver or ""})
        guests.half_rate.add("node1")
        vc = _Vcenter(slurm, {v.name: v.host for v in before.vms})
        run = new_run(tmp_path / "a", new)
        ports = Ports(slurm, vc, guests, guests, None, RealClock())  # type: ignore[arg-type]
        out = Roll(plan, run, ports, timing).run()
        assert out.status == "stopped" and [n.state for n in out.nodes] == ["failed", "pending"]
        shown = reasons_of(rack)
        assert shown["node1"].startswith(f"rackcert upgrade {run.path.name}: node.compute 50")
        assert "node2" not in shown and guests.versions["node2"] == guests.first
        # --rollback returns node1 to the certified driver, and it resumes.
        guests.half_rate.clear()
        back = Roll(plan, run, ports, timing, data=out).rollback("node1")
        assert back.nodes[0].state == "rolled_back"
        assert guests.versions["node1"]["nvidia_driver"] == before.guest.nvidia_driver
        _wait(lambda: slurm.nodes(["node1"])["node1"].in_service, 60, "node1 resumed")

        # A controller killed right after it drained node2, then run again: the same end.
        guests = _Guests({"nvidia_driver": before.guest.nvidia_driver or ""})
        vc = _Vcenter(slurm, {v.name: v.host for v in before.vms})
        run = new_run(tmp_path / "b", new)
        calls = {"n": 0}
        real_shutdown = vc.shutdown_guest

        def dies_second_time(vm):
            calls["n"] += 1
            if calls["n"] == 2:
                raise Killed()
            return real_shutdown(vm)

        vc.shutdown_guest = dies_second_time  # type: ignore[method-assign]
        ports = Ports(slurm, vc, guests, guests, None, RealClock())  # type: ignore[arg-type]
        with pytest.raises(Killed):
            Roll(plan, run, ports, timing).run()
        assert slurm.nodes(["node2"])["node2"].drained_by(run.path.name)
        vc.shutdown_guest = real_shutdown  # type: ignore[method-assign]
        record = RunDir.open(run.path).read_record("upgrade")
        out = Roll(plan, run, ports, timing, data=record.data).run()
        assert out.status == "done" and [n.state for n in out.nodes] == ["resumed"] * 2
        assert all(v["nvidia_driver"] == "470.141.03" for v in guests.versions.values())
        assert vc.lost == []
    finally:
        for node in names:
            if slurm.nodes([node])[node].drain:
                slurm.resume(node)
    assert reasons_of(rack) == {}


def reasons_of(rack: SlurmRack) -> dict[str, str]:
    """`sinfo -R`: the drained nodes and their reasons."""
    out = rack.lab.client("sinfo", "-R", "-h", "-N", "-o", "%N|%E").stdout
    return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)
