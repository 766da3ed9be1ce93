"""Stage records: one model per stage, published schemas, write-through, one spec per run."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from rackcert.core.errors import InputError, RecordError
from rackcert.core.runs import RunDir
from rackcert.core.spec_loader import load_spec
from rackcert.core.stage_records import RECORDS, Model, json_schema
from tests.support.stage_records import LAB, ROOT, SCHEMAS
from validation.bench import units  # noqa: F401 - bench's schema holds its units' blocks

R750 = ROOT / "inventories" / "r750xa-4node.yaml"


@pytest.mark.parametrize("stage", list(RECORDS))
def test_checked_in_stage_schema_is_current(stage: str) -> None:
    path = SCHEMAS / f"{stage}.schema.json"
    assert json.loads(path.read_text()) == json_schema(stage), (
        f"schemas/{stage}.schema.json is stale: regenerate it with"
        f" `rackcert report schema --stage {stage} > schemas/{stage}.schema.json`"
    )
    jsonschema.Draft202012Validator.check_schema(json_schema(stage))


# bench.json's data and launches hold each unit's own blocks (its result, its tasks' raw
# answers) under the unit's keys: registered parts are read through the unit's model
# (validation.bench.units.base.BenchUnit.parts), which forbids unknown keys like the rest.
OPEN_TO_UNITS = {"BenchData", "BenchLaunch"}


def test_every_stage_model_forbids_unknown_keys() -> None:
    def walk(model: type[Model], seen: set[type]) -> None:
        if model in seen:
            return
        seen.add(model)
        want = "allow" if model.__name__ in OPEN_TO_UNITS else "forbid"
        assert model.model_config.get("extra") == want, model.__name__
        for field in model.model_fields.values():
            for arg in [field.annotation, *getattr(field.annotation, "__args__", ())]:
                for inner in [arg, *getattr(arg, "__args__", ())]:
                    if isinstance(inner, type) and issubclass(inner, Model):
                        walk(inner, seen)

    for record in RECORDS.values():
        walk(record, set())


def test_committed_evidence_fits_the_stage_models() -> None:
    for path in sorted((ROOT / "docs" / "evidence").glob("*.json")):
        raw = json.loads(path.read_text())
        RECORDS[raw["stage"]].model_validate(raw)


def test_records_carry_the_producers_spec_digest_and_runs_refuse_another_spec(
    tmp_path: Path,
) -> None:
    lab = load_spec(LAB)
    run = RunDir.create(tmp_path, "lab", lab.sha256, lab.text)
    run.write_stage("plan", {})
    assert json.loads((run.path / "plan.json").read_text())["spec_sha256"] == lab.sha256
    assert RunDir.open(run.path, spec_sha256=lab.sha256).spec_sha256 == lab.sha256
    with pytest.raises(InputError, match="made from another version of the spec"):
        RunDir.open(run.path, spec_sha256=load_spec(R750).sha256)


def test_a_shape_the_model_does_not_name_is_refused(tmp_path: Path) -> None:
    lab = load_spec(LAB)
    run = RunDir.create(tmp_path, "lab", lab.sha256, lab.text)
    with pytest.raises(RecordError, match=r"bench.json not written: data.storage.read_mib_s"):
        run.write_stage("bench", {"storage": {"read_mib_s": 1.0}})
