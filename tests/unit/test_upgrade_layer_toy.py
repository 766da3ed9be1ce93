"""Adding an upgrade layer touches its declaration, its adapter, this test and
docs/upgrade.md: nothing in rackcert.upgrade, the record, the metrics or the report.

A toy "firmware" layer (a NIC firmware flashed from inside the guest, as mlxfwmanager does) is
declared and registered here, from outside the package, with an in-memory port. It is then
planned (the plan and `rackcert upgrade --plan` show its change, its step and the step's
proof), run by the machine against the in-memory rack of the upgrade's unit tests, recorded
(upgrade.json, mid-roll and at the end, validates against the schema generated from the
declarations), shown (the report's rolling-upgrade section) and measured (the
rackcert_upgrade_* families). Starts nothing: the rack is tests/support/upgrade_models.py's.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from rackcert.cli import main
from rackcert.core.runs import RunDir
from rackcert.core.spec import Spec
from rackcert.core.spec_loader import load_spec
from rackcert.core.stage_records import UpgradeRecord, ValidateData, json_schema
from rackcert.core.upgrade_layers import (
    Layer,
    Step,
    StepContext,
    node_states,
    register,
    registered,
)
from rackcert.metrics.families import exposition
from rackcert.metrics.upgrade import upgrade_families
from rackcert.report.rolling import upgrade_section
from rackcert.upgrade.machine import Ports, Roll
from rackcert.upgrade.ports import PortError
from tests.support.spec_helpers import LAB
from tests.support.upgrade_helpers import TIMING, four_node, make_plan, new_run, spec_of, world_for
from tests.support.upgrade_models import SimGuests

OLD, NEW = "28.39.1002", "28.40.1000"


def firmware_versions(spec: Spec, _where: str) -> dict[str, str]:
    return dict(spec.upgrade.layers.get("firmware", {}))


def flash(ctx: StepContext) -> str:
    ctx.port.flash(ctx.where, ctx.target)
    return "flashed " + ", ".join(f"{k} {v}" for k, v in sorted(ctx.target.items()))


FIRMWARE = Layer(
    name="firmware",
    side="guest",
    port="firmware",
    fields=("upgrade.layers.firmware",),
    versions=firmware_versions,
    node_state="firmware",
    steps=(Step("firmware flash", "the flash tool reads the new image back", flash),),
)


class FirmwarePort:
    """The adapter's in-memory stand-in: flashes the node's firmware, which its validate
    then reports (the node must be up); checks upgrade.json mid-roll."""

    def __init__(self, guests: SimGuests, record: Path):
        self.guests, self.record = guests, record
        self.flashed: list[str] = []
        self.mid_roll: list[str] = []

    def flash(self, node: str, versions: dict[str, str]) -> None:
        if self.guests.vc.power[node] != "poweredOn":
            raise PortError(f"{node}: flash tool unreachable")
        doc = json.loads(self.record.read_text())
        jsonschema.validate(doc, json_schema("upgrade"))
        self.mid_roll += [n["state"] for n in doc["data"]["nodes"] if n["name"] == node]
        self.guests.versions[node].update(versions)
        self.flashed.append(node)


def _with_firmware(data: dict[str, Any], version: str) -> dict[str, Any]:
    out = copy.deepcopy(data)
    out.setdefault("upgrade", {})["layers"] = {"firmware": {"nic": version}}
    return out


@pytest.fixture
def firmware() -> Iterator[Layer]:
    with registered(FIRMWARE) as layer:
        yield layer


def test_a_toy_layer_is_planned_run_recorded_shown_and_measured(tmp_path, firmware):
    data = _with_firmware(four_node(hosts=2), OLD)
    new = _with_firmware(data, NEW)
    before, after = spec_of(data), spec_of(new)
    plan = make_plan(before, after)
    # planned: the change, its place in the chain (guest side: after power on), its proof
    assert [c.line() for c in plan.changes] == [f"firmware: nic {OLD} -> {NEW}"]
    steps = plan.steps["lab-node1"]
    assert steps[steps.index("power on") + 1 : steps.index("validate")] == ["firmware flash"]
    assert "host image" not in steps and "guest layer" not in steps
    text = "\n".join(plan.lines())
    assert f"firmware: nic {OLD} -> {NEW}" in text
    assert "firmware flash: the flash tool reads the new image back" in text
    # run by the machine against the test port
    world = world_for(before)
    run = new_run(tmp_path, new)
    port = FirmwarePort(world.guests, run.path / "upgrade.json")
    ports = Ports(world.slurm, world.vc, world.guests, world.certifier, world.image, world.clock,
                  layers={"firmware": port})  # fmt: skip
    out = Roll(plan, run, ports, TIMING).run()
    assert out.status == "done" and [n.state for n in out.nodes] == ["resumed"] * 2
    assert port.flashed == ["lab-node1", "lab-node2"] and world.guests.applied == []
    assert port.mid_roll == ["firmware", "firmware"]  # recorded in its own state, validated
    assert all(n.versions_after["nic"] == NEW for n in out.nodes)
    # recorded: upgrade.json validates against the schema the declarations give
    record = json.loads((run.path / "upgrade.json").read_text())
    schema = json_schema("upgrade")
    assert "firmware" in schema["$defs"]["UpgradeNode"]["properties"]["state"]["enum"]
    assert "firmware" in schema["$defs"]["UpgradeChange"]["properties"]["layer"]["enum"]
    jsonschema.validate(record, schema)
    typed = UpgradeRecord.model_validate(record)
    node = typed.data.nodes[0]
    flashed = next(s for s in node.steps if s.step == "firmware flash")
    assert [s.step for s in node.steps].index("firmware flash") == 5  # after power on
    assert flashed.detail == f"flashed nic {NEW}"
    assert [h.state for h in typed.data.hosts] == ["unchanged", "unchanged"]
    # shown: the report's section has the step in each node's timeline
    rows, status = upgrade_section(RunDir.open(run.path))
    assert status is not None and status.startswith("done")
    assert all(any(t.startswith("firmware flash: done") for t in r.timeline) for r in rows)
    # measured: the node-state family knows the layer's state
    text = exposition(upgrade_families(typed, "lab")).decode()
    labels = 'host="lab-esx01",node="lab-node1",spec="lab",state="firmware"'
    assert f"rackcert_upgrade_node_state{{{labels}}} 0.0" in text


def test_rollback_flashes_the_certified_firmware_back(tmp_path, firmware):
    data = _with_firmware(four_node(hosts=1), OLD)
    before, after = spec_of(data), spec_of(_with_firmware(data, NEW))
    world = world_for(before)
    run = new_run(tmp_path, _with_firmware(data, NEW))
    port = FirmwarePort(world.guests, run.path / "upgrade.json")
    ports = Ports(world.slurm, world.vc, world.guests, world.certifier, world.image, world.clock,
                  layers={"firmware": port})  # fmt: skip
    roll = Roll(make_plan(before, after), run, ports, TIMING)
    roll.run()
    back = roll.rollback("lab-node1")
    assert back.nodes[0].state == "rolled_back" and back.nodes[0].versions_after["nic"] == OLD


def test_a_changing_layer_without_its_port_is_refused_before_anything_moves(tmp_path, firmware):
    data = _with_firmware(four_node(hosts=1), OLD)
    before, after = spec_of(data), spec_of(_with_firmware(data, NEW))
    world = world_for(before)
    roll = Roll(make_plan(before, after), new_run(tmp_path, data), world.ports(), TIMING)
    with pytest.raises(Exception, match="the firmware layer changes, but no firmware port"):
        roll.run()
    assert world.slurm.calls == []


def test_plan_cli_shows_the_registered_layer(tmp_path, firmware, capsys):
    loaded = load_spec(LAB)
    certified = RunDir.create(tmp_path / "runs", "lab", loaded.sha256, loaded.text)
    certified.write_stage("validate", ValidateData())
    certified.write_stage("report", {"verdict": "PASS"})
    spec = tmp_path / "new.yaml"
    spec.write_text(yaml.safe_dump(_with_firmware(yaml.safe_load(LAB.read_text()), NEW)))
    assert main(["upgrade", str(spec), "--plan", "--runs-dir", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert f"firmware: nic - -> {NEW}" in out
    assert (
        "lab-node1: ask -> drain -> measure before -> shutdown guest -> power on -> firmware flash"
        in out
    )


def test_without_the_layer_its_spec_entry_is_refused_and_its_state_unknown(tmp_path):
    assert "firmware" not in node_states()
    assert "firmware" not in json.dumps(json_schema("upgrade"))
    data = four_node(hosts=1)
    plan = make_plan(spec_of(data), spec_of(_with_firmware(data, NEW)))
    assert plan.blocking() == [
        "upgrade.layers.firmware: no upgrade layer of that name is registered"
    ]
    with pytest.raises(ValueError, match="not an upgrade node state"):
        UpgradeRecord.model_validate(
            {
                **_minimal_record(),
                "data": {
                    **_minimal_record()["data"],
                    "nodes": [{"name": "n", "host": "h", "state": "firmware"}],
                },
            }  # fmt: skip
        )


def _minimal_record() -> dict[str, Any]:
    return {
        "rack": "lab", "spec_sha256": "0" * 64, "status": "ok", "started_at": "t",
        "finished_at": "t",
        "data": {"certified_run": "c", "scheduler": "slurm", "max_unavailable": "1",
                 "max_failures": 1, "order": "spec"},
    }  # fmt: skip


@pytest.mark.parametrize("name", ["drain", "guest layer"])
def test_a_step_name_is_written_once_registration_refuses_another(name):
    twin = Layer(
        name="twin",
        side="guest",
        port="twin",
        fields=(),
        versions=firmware_versions,
        node_state="twin",
        steps=(Step(name, "never"),),
    )
    with pytest.raises(ValueError, match=f"step {name!r} is another's"):
        register(twin)
    assert "twin" not in node_states()
