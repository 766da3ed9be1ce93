"""bench.json's blocks typed (issue 46): records written before the models still load, and a
recorded run is judged the same by the units' checks as it was by the code that wrote it.

tests/support/fixtures/bench/lab-local-before-46.json is `rackcert bench inventories/lab.yaml
--local
--quick` as written by rackcert before validation/bench was laid out by job (its paths
replaced by neutral ones); docs/evidence/h200-bench-nccl-tests.json is an H200 record with
nccl-tests, the references and a skipped RDMA block, committed long before.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from rackcert.core.spec_loader import load_spec
from rackcert.core.stage_records import SCHEMA_VERSION, BenchRecord
from validation.bench.units.nccl_tests import NcclTestsResult
from validation.bench.units.rdma import RdmaResult
from validation.bench.units.references import References
from validation.bench.verdict import rejudge

REPO = Path(__file__).resolve().parents[2]
BEFORE = REPO / "tests" / "support" / "fixtures" / "bench" / "lab-local-before-46.json"
H200 = REPO / "docs" / "evidence" / "h200-bench-nccl-tests.json"


def test_a_record_written_before_the_change_loads_typed() -> None:
    raw = json.loads(BEFORE.read_text())
    rec = BenchRecord.model_validate(raw)
    assert rec.schema_version == SCHEMA_VERSION == 1
    nt = rec.data.part("nccl_tests")  # read through its unit's model
    assert isinstance(nt, NcclTestsResult) and nt.skipped
    assert nt.reason == "no GPU here: nccl-tests drives GPUs only"
    assert isinstance(rec.data.part("rdma"), RdmaResult) and rec.data.part("rdma").skipped
    assert rec.data.units is None  # no benchmark outside the schema then


def test_an_h200_record_with_every_block_loads_typed() -> None:
    rec = BenchRecord.model_validate_json(H200.read_text())
    nt = rec.data.part("nccl_tests")
    assert isinstance(nt, NcclTestsResult) and not nt.skipped and nt.correct
    assert (
        nt.points and nt.points[-1].in_place is not None and nt.points[-1].algbw_gbps
    )  # busbw 0: one GPU
    refs = rec.data.part("references")
    assert isinstance(refs, References)
    assert refs.plain is not None and refs.default_vs_plain
    assert isinstance(rec.data.part("rdma"), RdmaResult) and rec.data.part("rdma").skipped


def test_the_units_judge_an_old_record_as_it_was_judged() -> None:
    raw = json.loads(BEFORE.read_text())
    again = rejudge(load_spec(REPO / "inventories" / "lab.yaml").spec, raw["data"])
    was = raw["data"]["verdict"]
    assert again.verdict == was["verdict"]
    assert [(c.id, c.status.value) for c in again.checks] == [
        (c["id"], c["status"]) for c in was["checks"]
    ]
    assert again.not_judged == was["not_judged"] and again.reasons == was["reasons"]


def test_a_block_of_another_shape_is_refused() -> None:
    raw = json.loads(BEFORE.read_text())
    raw["data"]["rdma"] = {"skipped": True, "reason": "x", "bogus": 1}
    with pytest.raises(ValidationError, match="bogus"):
        BenchRecord.model_validate(raw)
