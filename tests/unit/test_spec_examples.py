"""The shipped example specs load, round-trip, and validate against the published schema."""

from __future__ import annotations

import jsonschema
import pytest
import yaml

from rackcert.core.placement import place
from rackcert.core.spec import Spec
from rackcert.core.spec_loader import load_spec, parse_spec
from tests.support.spec_helpers import EXAMPLES, R750, example_data


def test_examples_are_shipped():
    names = {p.name for p in EXAMPLES}
    assert {"r750xa-4node.yaml", "lab.yaml"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_loads_and_round_trips(path):
    loaded = load_spec(path)
    dumped = yaml.safe_dump(loaded.spec.model_dump(mode="json"), sort_keys=False)
    again = parse_spec(dumped, "round-trip.yaml")
    assert again.spec == loaded.spec
    assert len(loaded.sha256) == 64


def test_schema_rejects_unknown_key():
    schema = Spec.model_json_schema()
    data = example_data()
    data["hosts"][0]["colour"] = "blue"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema)


def test_r750xa_reproduces_the_dell_design():
    spec = load_spec(R750).spec
    assert len(spec.hosts) == 4
    profile = spec.hardware_profiles[0]
    assert profile.server_model == "PowerEdge R750xa"
    assert [g.memory_gb for g in profile.gpus] == [80, 80, 80, 80]
    assert sum(1 for g in profile.gpus if g.nvlink_peer) == 4
    assert profile.nics[0].speed_gbps == 100 and profile.nics[0].ports == 2
    assert spec.guest.nvidia_driver == "470.82.01" and spec.guest.cuda == "11.4"
    assert {t.vcpus for t in spec.vm_templates} == {32}
    assert {t.memory_gb for t in spec.vm_templates} == {64}
    placements = {p.vm: p for p in place(spec)}
    scenario2 = [placements[f"mn-node{i}"] for i in range(1, 5)]
    assert len({p.host for p in scenario2}) == 4
    assert all(len(p.gpus) == 1 for p in scenario2)
    assert placements["s1-pair"].nvlink_pair
    assert placements["s3-pair-a"].nvlink_pair and placements["s3-pair-b"].nvlink_pair
