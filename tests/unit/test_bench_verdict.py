"""The bench verdict never says PASS for what was not judged (certification.required).

PASS needs every required check judged and none failed; a threshold that is 0 or absent
is "not judged"; a bench that judged nothing is INCOMPLETE; the committed H200 evidence is
what this code judges of its own figures (INCOMPLETE: one GPU judges neither the busbw
fraction nor the scaling efficiency that the 4-node spec requires).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import get_args

import pytest
import yaml
from pydantic import ValidationError

from rackcert.core.results import Status, Verdict, VerdictCheckId
from rackcert.core.runs import RunDir
from rackcert.core.spec import Certification, Spec
from rackcert.core.spec_loader import load_spec
from rackcert.report.assemble import assemble
from tests.support.bench_units import ar as _ar
from tests.support.bench_units import sc as _sc
from tests.support.bench_verdict import LAB, ROOT
from validation.bench import verdict

EVIDENCE = ROOT / "docs" / "evidence"
R750 = ROOT / "inventories" / "r750xa-4node.yaml"
H200 = ROOT / "inventories" / "h200-local.yaml"


CERT = Certification(resnet50_images_per_gpu_min=2500)
ALL = ["allreduce.busbw_fraction", "resnet50.scaling_efficiency", "resnet50.images_per_gpu"]
STORAGE_OK = {"nodes": [{"reads": 10, "errors": 0}]}


def test_default_required_is_what_the_rack_can_judge() -> None:
    assert load_spec(R750).spec.required_checks() == ALL  # 4 nodes x 1 GPU
    assert load_spec(LAB).spec.required_checks() == ALL  # 2 nodes x 2 GPUs
    assert load_spec(H200).spec.required_checks() == ["resnet50.images_per_gpu"]  # 1 GPU


def test_the_verdict_judges_exactly_the_closed_set_of_check_ids() -> None:
    v = verdict.judge(CERT, None, None, [], None, judge_link=True)
    assert tuple(c.id for c in v.checks) == get_args(VerdictCheckId)


def test_required_is_a_closed_set_in_the_spec() -> None:
    assert Certification(required=[]).required == []
    with pytest.raises(ValidationError, match="resnet50.scaling_efficiency"):
        Certification(required=["resnet50.scaling"])


def test_everything_judged_and_passed_is_pass() -> None:
    raw = [{"world_size": 2, "loss_finite": True}]
    # NCCL ranks, each peer over P2P or NET/IB: every check has something to judge
    nccl = _ar(4, 0.8).model_copy(update={"backend": "nccl"})
    ranks = [{"rank": str(r), "transports": {"peer": "P2P"}, "gdr": True} for r in range(4)]
    data = {
        "allreduce": nccl.model_dump(),
        "resnet50": _sc([2757, 2700]).model_dump(),
        "launches": [{"resnet": r} for r in raw],
        "storage": STORAGE_OK,
        "judge_link": True,
        "nccl_transport": {"rdma_expected": False, "ranks": ranks, "problems": []},
    }
    v = verdict.judge_data(CERT, data, required=ALL)
    assert (v.verdict, v.passed, v.not_judged) == ("PASS", True, [])
    assert [c.id for c in v.checks if c.required] == ALL


def test_gloo_ranks_have_no_nccl_transport_check_neither_passed_nor_not_judged() -> None:
    raw = [{"world_size": 2, "loss_finite": True}]
    v = verdict.judge(
        CERT, _ar(4, 0.8), _sc([2757, 2700]), raw, STORAGE_OK, judge_link=True, required=ALL
    )
    assert (v.verdict, v.passed, v.not_judged) == ("PASS", True, [])
    assert "allreduce.nccl_transport" not in {c.id for c in v.checks}


def test_a_required_check_not_judged_is_incomplete_with_the_reason() -> None:
    v = verdict.judge(CERT, _ar(1, None), _sc([6985.2]), [], None, judge_link=False, required=ALL)
    assert v.verdict == "INCOMPLETE" and not v.passed and v.reasons == []
    assert any(
        line.startswith("allreduce.busbw_fraction (required): one rank moves no bytes")
        for line in v.not_judged
    )
    assert any(line.startswith("resnet50.scaling_efficiency (required)") for line in v.not_judged)
    # the same figures with nothing required: judged checks passed, so PASS
    v = verdict.judge(CERT, _ar(1, None), _sc([6985.2]), [], None, judge_link=False)
    assert v.verdict == "PASS"


def test_a_failure_wins_over_incomplete() -> None:
    v = verdict.judge(CERT, _ar(1, None), _sc([100.0]), [], None, judge_link=False, required=ALL)
    assert v.verdict == "FAIL" and v.reasons[0].startswith("resnet50.images_per_gpu")


@pytest.mark.parametrize("floor", [None, 0])
def test_a_zero_or_absent_threshold_is_not_judged_never_pass(floor: float | None) -> None:
    cert = Certification(resnet50_images_per_gpu_min=floor)
    v = verdict.judge(cert, None, _sc([1.0]), [], None, judge_link=True)
    check = {c.id: c for c in v.checks}["resnet50.images_per_gpu"]
    assert check.status is Status.skipped and "no threshold" in check.reason
    required = verdict.judge(
        cert, None, _sc([1.0]), [], None, judge_link=True, required=["resnet50.images_per_gpu"]
    )
    assert required.verdict == "INCOMPLETE"


def test_a_bench_that_measured_nothing_is_incomplete_even_with_nothing_required() -> None:
    v = verdict.judge(CERT, None, None, [], {"skipped": True, "reason": "skipped"}, judge_link=True)
    assert v.verdict == "INCOMPLETE" and not v.passed
    assert len(v.not_judged) == len(v.checks)


def test_verdict_word_and_passed_cannot_disagree() -> None:
    with pytest.raises(ValidationError, match="disagrees"):
        Verdict(verdict="INCOMPLETE", passed=True)
    # a record from before the three-way verdict: its PASS said nothing about skips
    assert Verdict.model_validate({"passed": True, "reasons": []}).verdict == "INCOMPLETE"
    assert Verdict.model_validate({"passed": False, "reasons": ["x"]}).verdict == "FAIL"


@pytest.mark.parametrize("name", sorted(p.name for p in EVIDENCE.glob("h200-bench*.json")))
def test_committed_evidence_verdict_is_what_the_code_judges(name: str) -> None:
    record = json.loads((EVIDENCE / name).read_text())
    # The evidence is judged against the spec it was measured with, kept beside it (the
    # example in inventories/ has grown fields since).
    # Read as data (models, no cross-field rules): rules added since, such as one NIC
    # function per VM, refuse that older example, but its certification is what judged.
    text = (EVIDENCE / "h200-spec.yaml").read_text()
    assert record["spec_sha256"] == hashlib.sha256(text.encode()).hexdigest()
    again = verdict.rejudge(Spec.model_validate(yaml.safe_load(text)), record["data"])
    assert Verdict.model_validate(record["data"]["verdict"]) == again, (
        f"{name}: run tools/rejudge_bench.py docs/evidence/h200-spec.yaml docs/evidence/{name}"
    )


def test_h200_evidence_is_incomplete_with_reasons_in_the_report(tmp_path: Path) -> None:
    loaded = load_spec(R750)
    run = RunDir.create(tmp_path / "runs", loaded.spec.metadata.name, loaded.sha256, loaded.text)
    (run.path / "bench.json").write_text((EVIDENCE / "h200-bench.json").read_text())
    data = json.loads((EVIDENCE / "h200-bench.json").read_text())["data"]
    assert data["verdict"]["verdict"] == "INCOMPLETE"
    rec = assemble(run)
    assert rec.verdict.verdict == "INCOMPLETE"
    reasons = " | ".join(rec.verdict.reasons)
    assert "bench: allreduce.busbw_fraction (required) not judged: one rank" in reasons
    assert "bench: resnet50.scaling_efficiency (required) not judged: only one scale" in reasons
    assert any(n.startswith("bench resnet50.scaling_efficiency") for n in rec.verdict.not_judged)


def test_bench_junit_agrees_with_the_verdict() -> None:
    from rackcert.core.results import Status, VerdictCheck
    from validation.junit import bench_results

    passed = VerdictCheck(id="resnet50.images_per_gpu", status=Status.passed, required=True)
    optional = VerdictCheck(id="storage.read", status=Status.skipped, reason="not run")
    required = VerdictCheck(
        id="resnet50.scaling_efficiency", status=Status.skipped, reason="one point", required=True
    )
    ok = Verdict(verdict="PASS", passed=True, checks=[passed, optional])
    assert [r.status for r in bench_results(ok)] == [Status.passed, Status.skipped]
    incomplete = Verdict(verdict="INCOMPLETE", passed=False, checks=[passed, required])
    results = bench_results(incomplete)
    assert results[1].status is Status.failed and "one point" in results[1].reason
    empty = bench_results(Verdict(verdict="INCOMPLETE", passed=False))
    assert [r.status for r in empty] == [Status.failed]
