"""The rolling upgrade as pure units: the plan, the refusals, the budget and the waves, and
the per-node state machine against in-memory models of Slurm and vCenter."""

from __future__ import annotations

import json

import jsonschema
import pytest

from rackcert.core.errors import InputError
from rackcert.core.matrix import load_references
from rackcert.core.paths import REPO_ROOT
from rackcert.core.stage_records import UpgradeRecord
from rackcert.upgrade.budget import Budget, Unit, plan_waves
from rackcert.upgrade.layers import diff
from rackcert.upgrade.machine import Timing
from rackcert.upgrade.plan import PlanOptions, build_plan
from rackcert.upgrade.ports import drain_reason
from tests.support.upgrade_helpers import (
    NEW_DRIVER,
    NEW_ESXI,
    TIMING,
    four_node,
    make_plan,
    new_run,
    roll,
    spec_of,
    upgraded,
    world_for,
)
from tests.support.upgrade_roll import pair as _pair


# -- layers, refusals, budget -----------------------------------------------------------------
def test_the_diff_names_the_host_image_and_the_guest_driver():
    _, before, after = _pair()
    changes = diff(before, after)
    assert [c.line() for c in changes] == [
        "host: esxi 7.0.3 -> 7.0.3u on lab-esx01, lab-esx02, lab-esx03, lab-esx04",
        f"guest: nvidia_driver 470.82.01 -> {NEW_DRIVER}",
    ]


def test_the_plan_orders_hosts_in_waves_within_the_budget():
    _, before, after = _pair(hosts=4, per_host=2)
    plan = make_plan(before, after, max_unavailable="2")
    assert [[u.host for u in w] for w in plan.waves] == [
        ["lab-esx01"],
        ["lab-esx02"],
        ["lab-esx03"],
        ["lab-esx04"],
    ]
    plan = make_plan(before, after, max_unavailable="50%")  # 8 nodes: 4 out at once
    assert [[u.host for u in w] for w in plan.waves] == [
        ["lab-esx01", "lab-esx02"],
        ["lab-esx03", "lab-esx04"],
    ]
    steps = plan.steps["lab-node1"]
    assert steps.index("host image") < steps.index("guest layer") < steps.index("resume")
    assert steps[:2] == ["ask", "drain"]  # lab.yaml names no scheduler: the roll asks
    assert "the roll ASKS before taking each node out" in "\n".join(plan.lines())
    with_slurm = four_node()
    with_slurm["slurm"] = {
        "controller": {"address": "10.77.0.1"},
        "cluster": "lab",
        "partition": "gpu",
        "munge_key_file": "/etc/munge/munge.key",
    }
    plan = make_plan(spec_of(with_slurm), spec_of(upgraded(with_slurm)))
    assert plan.scheduler == "slurm" and plan.limits == {"gpu": 1}
    assert plan.steps["lab-node1"][:2] == ["drain", "wait drained"]


def test_a_host_no_budget_can_free_is_refused():
    _, before, after = _pair(hosts=2, per_host=2)
    plan = make_plan(before, after, max_unavailable="1")
    assert any("lab-esx01: its 2 node(s) in partition rack" in r for r in plan.blocking())
    assert plan.waves == []
    plan = make_plan(before, after, max_unavailable="10%")  # 4 nodes: rounds down to 0
    assert any("--max-unavailable allows 0" in r for r in plan.blocking())


@pytest.mark.parametrize("text", ["0", "abc", "101%", "-1", "1.5"])
def test_a_bad_budget_is_one_line(text):
    with pytest.raises(InputError, match="--max-unavailable"):
        Budget.parse(text)


def test_waves_never_split_a_host_and_keep_the_order():
    units = [Unit("a", ("1", "2")), Unit("b", ("3",)), Unit("c", ("4",))]
    parts = {n: ("p",) for n in "1234"}
    assert [[u.host for u in w] for w in plan_waves(units, parts, {"p": 3})] == [["a", "b"], ["c"]]


def test_order_takes_a_node_list_or_least_busy_and_refuses_a_stranger():
    _, before, after = _pair()
    plan = make_plan(before, after, order=["lab-node3", "lab-node1"])
    assert [u.host for u in plan.units] == ["lab-esx03", "lab-esx01", "lab-esx02", "lab-esx04"]
    world = world_for(before)
    world.slurm.submit("lab-node1", 100)
    world.slurm.submit("lab-node1", 100)
    world.slurm.submit("lab-node2", 100)
    states = world.slurm.nodes([v.name for v in before.vms])
    plan = make_plan(before, after, order=["least-busy"], states=states)
    assert [u.host for u in plan.units] == ["lab-esx03", "lab-esx04", "lab-esx02", "lab-esx01"]
    with pytest.raises(InputError, match="lab-node9, not a node of this rack"):
        make_plan(before, after, order=["lab-node9"])


def test_a_guest_driver_newer_than_the_vgpu_manager_is_refused():
    data = four_node()
    data["vm_templates"][0].update(gpu_mode="vgpu", vgpu_profile="grid_a100-40c")
    data["host_software"] = {"vgpu_manager_version": "470.129.04"}
    new = upgraded(data, driver="535.154.05", esxi=None)
    plan = make_plan(spec_of(data), spec_of(new))
    assert any("guest driver 535.154.05 (R535) is of a newer branch" in r for r in plan.blocking())
    new["host_software"]["vgpu_manager_version"] = "535.154.02"
    plan = make_plan(spec_of(data), spec_of(new))
    assert plan.blocking() == []
    assert "vGPU manager) before the guest driver" in plan.order_note


def test_a_version_the_certified_matrix_does_not_list_is_refused_unless_allowed():
    data = four_node()
    before, after = spec_of(data), spec_of(upgraded(data, driver="535.154.05", esxi=None))
    ref = load_references()["dell-r750xa-a100-esxi703"]
    for allow in (False, True):
        plan = build_plan(
            before,
            after,
            PlanOptions(Budget.parse("1"), allow_uncertified=allow),
            certified_run="c",
            reference=ref,
            matrix_where="validation/certified",
        )
        assert len(plan.refusals.uncertified) == 1
        assert (
            "nvidia_driver 535.154.05 is not in certified-matrix entry"
            in (plan.refusals.uncertified[0])
        )
        assert bool(plan.blocking()) is not allow
    ok = spec_of(upgraded(data, driver="470.141.03", esxi=None))  # still R470: listed
    plan = build_plan(
        before,
        ok,
        PlanOptions(Budget.parse("1")),
        certified_run="c",
        reference=ref,
        matrix_where="validation/certified",
    )
    assert plan.blocking() == []


def test_a_changed_rack_is_not_an_upgrade():
    data = four_node()
    new = upgraded(data)
    new["vms"][0]["host"] = "lab-esx02"
    plan = make_plan(spec_of(data), spec_of(new))
    assert any("VMs differ from the certified run's spec (lab-node1)" in r for r in plan.blocking())


def test_an_operator_drain_is_left_alone_and_does_not_block(tmp_path):
    data, before, after = _pair()
    world = world_for(before)
    world.slurm.drain("lab-node2", "bad fan, ticket 4711")
    states = world.slurm.nodes([v.name for v in before.vms])
    plan = make_plan(before, after, states=states, run="r")
    assert plan.left_alone == {"lab-node2": "drained by someone else: bad fan, ticket 4711"}
    assert "lab-esx02" not in [u.host for u in plan.units]
    run = new_run(tmp_path, upgraded(data))
    data_out = roll(plan, run, world).run()
    assert data_out.status == "done"
    assert world.slurm.table["lab-node2"].reason == "bad fan, ticket 4711"
    assert ("drain", "lab-node2") in world.slurm.calls[:1]  # only the test's own drain
    assert [n.state for n in data_out.nodes if n.name != "lab-node2"] == ["resumed"] * 3


# -- the roll -----------------------------------------------------------------------------------
def _assert_clean(world, run_name):
    assert world.vc.marks == {}, "a host left in rackcert's maintenance"
    assert not any(world.vc.maintenance.values())
    for node in world.slurm.table.values():
        assert not node.reason.startswith(drain_reason(run_name)) or ":" in node.reason


def test_a_roll_upgrades_every_node_without_losing_a_job(tmp_path):
    data, before, after = _pair()
    world = world_for(before)
    plan = make_plan(before, after)
    run = new_run(tmp_path, upgraded(data))
    out = roll(plan, run, world).run()
    assert out.status == "done" and out.failures == 0
    assert [n.state for n in out.nodes] == ["resumed"] * 4
    assert all(n.versions_after["nvidia_driver"] == NEW_DRIVER for n in out.nodes)
    assert all(world.vc.images[h]["esxi"] == NEW_ESXI for h in world.vc.images)
    assert all(h.boot_time_after > h.boot_time_before for h in out.hosts)
    lost = [j for j in world.slurm.jobs if j.state != "RUNNING" and j.state != "COMPLETED"]
    assert lost == [], "a job was killed by the roll"
    assert len(world.slurm.jobs) > 20  # the stream ran through the roll
    assert world.slurm.max_out == {"rack": 1}
    assert out.out_of_service_max == {"rack": 1}
    _assert_clean(world, run.path.name)
    # Host order: maintenance only with its VM off; guest layer after the reboot.
    for host in ("lab-esx01", "lab-esx04"):
        ev = [e for e in world.vc.events if e[2] in (host, host.replace("esx0", "node"))]
        kinds = [k for _, k, _ in ev]
        assert kinds == ["shutdown", "off", "maintenance", "reboot", "exit", "on"], kinds
    record = json.loads((run.path / "upgrade.json").read_text())
    schema = json.loads((REPO_ROOT / "schemas/upgrade.schema.json").read_text())
    jsonschema.validate(record, schema)
    UpgradeRecord.model_validate(record)
    steps = [s["step"] for s in record["data"]["nodes"][0]["steps"]]
    assert steps == [
        "drain",
        "wait drained",
        "measure before",
        "shutdown guest",
        "power on",
        "guest layer",
        "validate",
        "resume",
    ]


def test_a_node_that_fails_stays_drained_with_the_finding_and_the_rest_is_untouched(tmp_path):
    data, before, after = _pair()
    world = world_for(before)
    world.guests.half_rate.add("lab-node3")
    plan = make_plan(before, after)
    run = new_run(tmp_path, upgraded(data))
    out = roll(plan, run, world).run()
    states = {n.name: n.state for n in out.nodes}
    assert states == {
        "lab-node1": "resumed",
        "lab-node2": "resumed",
        "lab-node3": "failed",
        "lab-node4": "pending",
    }
    assert out.status == "stopped" and "--max-failures 1" in out.stopped_because
    node3 = world.slurm.table["lab-node3"]
    assert node3.drain
    assert node3.reason == (
        f"rackcert upgrade {run.path.name}: node.compute 50 below 0.7 x its before 100 (+1 more)"
    )
    assert out.nodes[2].findings == [
        "node.compute 50 below 0.7 x its before 100",
        "node.compute 50 below the rack's median rule (0.7 x median 100)",
    ]
    assert not [c for c in world.slurm.calls if c[1] == "lab-node4"]
    assert world.vc.images["lab-esx04"]["esxi"] == "7.0.3"
    assert "lab-node4" not in world.guests.applied
    _assert_clean(world, run.path.name)


def test_a_failed_install_stops_the_roll_and_rollback_returns_the_node(tmp_path):
    data, before, after = _pair()
    world = world_for(before)
    world.guests.broken_install.add("lab-node3")
    plan = make_plan(before, after)
    run = new_run(tmp_path, upgraded(data))
    out = roll(plan, run, world).run()
    assert world.slurm.table["lab-node3"].reason.endswith(
        f"guest layer: lab-node3: nvidia-driver {NEW_DRIVER} failed to install"
    )
    assert out.nodes[2].state == "failed" and out.nodes[3].state == "pending"
    world.guests.broken_install.clear()
    again = roll(plan, run, world, data=out).rollback("lab-node3")
    node3 = again.nodes[2]
    assert node3.state == "rolled_back"
    assert world.guests.versions["lab-node3"]["nvidia_driver"] == "470.82.01"
    assert world.vc.images["lab-esx03"]["esxi"] == "7.0.3"
    assert not world.slurm.table["lab-node3"].drain
    _assert_clean(world, run.path.name)
    with pytest.raises(InputError, match="never changed it"):
        roll(plan, run, world, data=again).rollback("lab-node4")


def test_a_guest_only_rollback_leaves_the_host_unchanged_not_failed(tmp_path):
    data, before, _ = _pair()
    after = spec_of(upgraded(data, esxi=None))
    world = world_for(before)
    world.guests.broken_install.add("lab-node3")
    plan = make_plan(before, after)
    run = new_run(tmp_path, upgraded(data, esxi=None))
    out = roll(plan, run, world).run()
    host3 = next(h for h in out.hosts if h.name == "lab-esx03")
    assert out.nodes[2].state == "failed" and host3.state == "failed"
    world.guests.broken_install.clear()
    again = roll(plan, run, world, data=out).rollback("lab-node3")
    assert again.nodes[2].state == "rolled_back"
    assert next(h for h in again.hosts if h.name == "lab-esx03").state == "unchanged"
    assert next(h for h in again.hosts if h.name == "lab-esx01").state == "unchanged"
    assert world.vc.images["lab-esx03"]["esxi"] == "7.0.3"


def test_draining_is_not_drained_and_the_policy_decides(tmp_path):
    data, before, after = _pair()
    for policy, status in (("skip", "done"), ("stop", "stopped")):
        world = world_for(before)
        world.slurm.stream = False
        world.slurm.submit("lab-node1", 10_000)  # outlives the drain timeout
        plan = make_plan(before, after)
        run = new_run(tmp_path / policy, upgraded(data))
        timing = Timing(**{**TIMING.__dict__, "drain_policy": policy, "drain_timeout": 30})
        out = roll(plan, run, world, timing).run()
        assert out.status == status
        node1 = out.nodes[0]
        assert "lab-node1 still running jobs after" in node1.reason
        assert not world.slurm.table["lab-node1"].drain, "the roll's drain is given back"
        assert world.slurm.jobs[0].state == "RUNNING"  # never killed
        assert world.vc.power["lab-node1"] == "poweredOn"
        expected = (
            ["skipped", "resumed", "resumed", "resumed"] if policy == "skip" else ["pending"] * 4
        )
        assert [n.state for n in out.nodes] == expected


def test_a_guest_that_does_not_shut_down_is_powered_off_and_recorded(tmp_path):
    data, before, after = _pair()
    world = world_for(before)
    world.vc.tools_dead.add("lab-node2")
    out = roll(make_plan(before, after), new_run(tmp_path, upgraded(data)), world).run()
    assert out.status == "done"
    node2 = out.nodes[1]
    assert node2.forced_power_off and not out.nodes[0].forced_power_off
    step = next(s for s in node2.steps if s.step == "shutdown guest")
    assert step.detail == "powered off: guest still on 10 s after ShutdownGuest"


class Killed(BaseException):
    """SIGKILL, as far as the roll can tell: nothing after it runs."""


def _kill_after(world, calls: int):
    """Make the Nth world-changing call die (before it happens), like a killed controller."""
    count = {"n": 0}
    targets = [
        (world.slurm, "drain"),
        (world.slurm, "resume"),
        (world.vc, "shutdown_guest"),
        (world.vc, "enter_maintenance"),
        (world.vc, "reboot"),
        (world.vc, "exit_maintenance"),
        (world.vc, "power_on"),
        (world.guests, "apply"),
    ]
    originals = {}
    for obj, name in targets:
        original = getattr(obj, name)
        originals[(obj, name)] = original

        def wrapped(*a, _orig=original, **kw):
            count["n"] += 1
            if count["n"] == calls:
                raise Killed()
            return _orig(*a, **kw)

        setattr(obj, name, wrapped)

    def restore():
        for (obj, name), original in originals.items():
            setattr(obj, name, original)

    return restore


@pytest.mark.parametrize("at", [1, 4, 5, 7, 14, 30])
def test_a_killed_controller_run_again_reaches_the_same_end(tmp_path, at):
    from rackcert.core.runs import RunDir

    data, before, after = _pair()
    world = world_for(before)
    plan = make_plan(before, after)
    run = new_run(tmp_path, upgraded(data))
    restore = _kill_after(world, at)
    with pytest.raises(Killed):
        roll(plan, run, world).run()
    restore()
    world.clock.sleep(20)  # time passes before the operator runs it again
    record = UpgradeRecord.model_validate(RunDir.open(run.path).read_record("upgrade").model_dump())
    out = roll(plan, run, world, data=record.data).run()
    assert out.status == "done", out.stopped_because
    assert [n.state for n in out.nodes] == ["resumed"] * 4
    assert all(
        world.guests.versions[n]["nvidia_driver"] == NEW_DRIVER for n in world.guests.versions
    )
    assert all(world.vc.images[h]["esxi"] == NEW_ESXI for h in world.vc.images)
    assert [j for j in world.slurm.jobs if j.state not in ("RUNNING", "COMPLETED")] == []
    assert world.slurm.max_out == {"rack": 1}
    assert not any(n.drain for n in world.slurm.table.values())
    _assert_clean(world, run.path.name)


def test_a_maintenance_window_an_interrupted_run_left_is_closed(tmp_path):
    data, before, after = _pair()
    world = world_for(before)
    world.vc.marks["lab-esx03"] = "entered by an older run"
    world.vc.maintenance["lab-esx03"] = True
    out = roll(make_plan(before, after), new_run(tmp_path, upgraded(data)), world).run()
    assert out.status == "done"
    assert "lab-esx03: closed a maintenance window an interrupted run left" in out.notes


def test_the_upgrade_metrics_say_what_the_record_says(tmp_path):
    from rackcert.core.runs import RunDir
    from rackcert.metrics.families import exposition
    from rackcert.metrics.upgrade import upgrade_families

    data, before, after = _pair()
    world = world_for(before)
    world.guests.half_rate.add("lab-node2")
    run = new_run(tmp_path, upgraded(data))
    roll(make_plan(before, after), run, world).run()
    record = RunDir.open(run.path).read_record("upgrade")
    text = exposition(upgrade_families(record, "lab")).decode()
    state = "rackcert_upgrade_node_state"
    assert f'{state}{{host="lab-esx02",node="lab-node2",spec="lab",state="failed"}} 1.0' in text
    assert f'{state}{{host="lab-esx01",node="lab-node1",spec="lab",state="resumed"}} 1.0' in text
    assert 'rackcert_upgrade_nodes_out_of_service{partition="rack",spec="lab"} 1.0' in text
    assert 'rackcert_upgrade_nodes_out_of_service_max{partition="rack",spec="lab"} 1.0' in text
    assert 'rackcert_upgrade_failures{spec="lab"} 1.0' in text


def test_a_hosts_vms_go_out_together_and_fail_alone(tmp_path):
    data, before, after = _pair(hosts=2, per_host=2)
    world = world_for(before)
    world.guests.half_rate.add("lab-node2")
    plan = make_plan(before, after, max_unavailable="2", max_failures=2)
    out = roll(plan, new_run(tmp_path, upgraded(data)), world).run()
    assert {n.name: n.state for n in out.nodes} == {
        "lab-node1": "resumed", "lab-node2": "failed", "lab-node3": "pending",
        "lab-node4": "pending",
    }  # fmt: skip
    assert out.stopped_because.startswith("partition rack: 1 node(s) already out of service")
    off = [(t, k, vm) for t, k, vm in world.vc.events if k == "off"]
    assert [vm for _, _, vm in off] == ["lab-node1", "lab-node2"]
    enter = next(t for t, k, h in world.vc.events if k == "maintenance" and h == "lab-esx01")
    assert all(t <= enter for t, _, _ in off)
    assert world.slurm.max_out == {"rack": 2}


def test_a_remediation_that_rebooted_the_host_is_proven_not_repeated(tmp_path):
    data, before, after = _pair(hosts=1)
    world = world_for(before)
    world.image.reboots = True
    out = roll(make_plan(before, after), new_run(tmp_path, upgraded(data)), world).run()
    assert out.status == "done"
    kinds = [k for _, k, _ in world.vc.events]
    assert "remediation reboot" in kinds and "reboot" not in kinds
    host = out.hosts[0]
    assert host.boot_time_after > host.boot_time_before
    step = next(s for s in host.steps if s.step == "reboot")
    assert "rebooted by the image's remediation" in step.detail


def test_the_report_names_the_failed_node_and_its_finding(tmp_path):
    from rackcert.report.assemble import assemble
    from rackcert.report.html import render_html

    data, before, after = _pair()
    world = world_for(before)
    world.guests.half_rate.add("lab-node3")
    run = new_run(tmp_path, upgraded(data))
    roll(make_plan(before, after), run, world).run()
    record = assemble(run)
    rows = {u.node: u for u in record.upgrade}
    assert rows["lab-node3"].state == "failed"
    assert "node.compute 50 below 0.7 x its before 100" in rows["lab-node3"].reason
    assert rows["lab-node1"].after["nvidia_driver"] == NEW_DRIVER
    assert rows["lab-node1"].out_minutes is not None and rows["lab-node4"].out_minutes is None
    assert record.upgrade_status.startswith("stopped (from certified run certified)")
    html = render_html(record)
    assert 'id="upgrade"' in html and "lab-node3" in html and "its before 100" in html


@pytest.mark.parametrize("at", [2, 3, 4])
def test_a_kill_between_a_hosts_two_drains_is_finished_by_the_rerun(tmp_path, at):
    from rackcert.core.runs import RunDir

    data, before, after = _pair(hosts=2, per_host=2)
    world = world_for(before)
    plan = make_plan(before, after, max_unavailable="2")
    run = new_run(tmp_path, upgraded(data))
    restore = _kill_after(world, at)
    with pytest.raises(Killed):
        roll(plan, run, world).run()
    restore()
    record = RunDir.open(run.path).read_record("upgrade")
    out = roll(plan, run, world, data=record.data).run()
    assert out.status == "done", out.stopped_because
    assert [n.state for n in out.nodes] == ["resumed"] * 4
    assert not any(n.drain for n in world.slurm.table.values())
    assert [j for j in world.slurm.jobs if j.state not in ("RUNNING", "COMPLETED")] == []
    _assert_clean(world, run.path.name)


def test_a_node_resumed_behind_the_rolls_back_is_drained_again(tmp_path):
    data, before, after = _pair(hosts=1)
    world = world_for(before)
    world.slurm.stream = False
    world.slurm.submit("lab-node1", 5)
    original = world.slurm.nodes
    seen = {"n": 0}

    def operator_resumes(names):
        seen["n"] += 1
        if seen["n"] == 3:  # while the roll waits for DRAINED
            world.slurm.resume("lab-node1")
        return original(names)

    world.slurm.nodes = operator_resumes
    out = roll(make_plan(before, after), new_run(tmp_path, upgraded(data)), world).run()
    assert out.status == "done"
    assert "lab-node1: resumed while the roll waited; drained again" in out.notes
    assert [j.state for j in world.slurm.jobs] == ["COMPLETED"]
