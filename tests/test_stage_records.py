"""Stage records: one model per stage, published schemas, write-through, one spec per run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from rackcert.core.errors import InputError, RecordError
from rackcert.core.runs import RunDir
from rackcert.core.spec_loader import load_spec
from rackcert.core.stage_records import RECORDS, Model, json_schema
from validation.bench import units  # noqa: F401 - bench's schema holds its units' blocks

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "schemas"
LAB = ROOT / "inventories" / "lab.yaml"
R750 = ROOT / "inventories" / "r750xa-4node.yaml"


def validate_run_dir(run: Path) -> list[str]:
    """Every stage record in `run` against its checked-in JSON Schema; the stages seen."""
    seen = []
    for stage in RECORDS:
        path = run / f"{stage}.json"
        if path.is_file():
            schema = json.loads((SCHEMAS / f"{stage}.schema.json").read_text())
            jsonschema.validate(json.loads(path.read_text()), schema)
            seen.append(stage)
    return seen


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


def test_schema_cli_prints_each_stage_and_refuses_an_unknown_one() -> None:
    env_cmd = [sys.executable, "-m", "rackcert.cli", "report", "schema", "--stage"]
    ok = subprocess.run([*env_cmd, "bench"], capture_output=True, text=True, cwd=ROOT, check=False)
    assert ok.returncode == 0 and json.loads(ok.stdout)["title"] == "BenchRecord"
    bad = subprocess.run([*env_cmd, "nope"], capture_output=True, text=True, cwd=ROOT, check=False)
    assert bad.returncode == 2 and bad.stderr.startswith("error: --stage 'nope'")


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


def test_stage_with_run_of_another_spec_is_one_error_line(tmp_path: Path) -> None:
    lab = load_spec(LAB)
    run = RunDir.create(tmp_path, "lab", lab.sha256, lab.text)
    edited = tmp_path / "lab-edited.yaml"
    edited.write_text(lab.text.replace("mtu: 9000", "mtu: 1500"))
    assert edited.read_text() != lab.text
    done = subprocess.run(
        # --local: the lab's VMs need not be up (else "the lab is not up" comes first)
        [sys.executable, "-m", "rackcert.cli", "validate", str(edited), "--local",
         "--run", str(run.path)],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().endswith(
        "another version of the spec (sha256 differs); start a new run instead"
    )
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (run.path / "validate.json").exists()


def test_a_shape_the_model_does_not_name_is_refused(tmp_path: Path) -> None:
    lab = load_spec(LAB)
    run = RunDir.create(tmp_path, "lab", lab.sha256, lab.text)
    with pytest.raises(RecordError, match=r"bench.json not written: data.storage.read_mib_s"):
        run.write_stage("bench", {"storage": {"read_mib_s": 1.0}})
