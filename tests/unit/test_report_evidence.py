"""The report reads the real records other stages committed as evidence (docs/evidence/)."""

from __future__ import annotations

import json

from rackcert.report.assemble import assemble
from tests.support.plugins.report_evidence import REF, REPO


def test_h200_evidence_reads_cleanly(h200_run):
    assert assemble(h200_run).matrix.note.startswith("no certified-matrix reference chosen")
    rec = assemble(h200_run, reference=REF)
    validate = json.loads((h200_run.path / "validate.json").read_text())["data"]
    bench = json.loads((h200_run.path / "bench.json").read_text())["data"]
    assert rec.check_counts.total == validate["summary"]["total"]
    assert all(s.status != "unreadable" for s in rec.stages)
    assert rec.bench.resnet50 is not None and rec.bench.allreduce is not None
    assert rec.bench.verdict is not None and rec.bench.verdict.passed == bench["verdict"]["passed"]
    # the verdict is exactly what the stages recorded, combined
    want = bench["verdict"]["verdict"] if validate["summary"]["ok"] else "FAIL"
    assert rec.verdict.verdict == want
    for reason in bench["verdict"]["reasons"]:
        assert f"bench: {reason}" in rec.verdict.reasons
    # what bench did not judge is listed, never counted as passed
    assert len(rec.verdict.not_judged) == len(bench["verdict"]["not_judged"])
    node = rec.software["bench environment"]
    assert node["gpu_model"] == bench["environment"]["gpu"]
    # an H200 is not the reference's A100: the matrix says so instead of guessing
    rows = {r.component: r.status for r in rec.matrix.rows}
    assert rows["gpu_model"] == "differs" and rows["esxi_version"] == "unknown"
    assert rec.bench.reference_resnet50 == []


def test_h200_record_validates_against_the_schema(h200_run):
    import jsonschema

    schema = json.loads((REPO / "schemas" / "run.schema.json").read_text())
    jsonschema.validate(assemble(h200_run, reference=REF).to_json(), schema)
