"""The report reads the real records other stages committed as evidence (docs/evidence/)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rackcert.core.runs import RunDir
from rackcert.core.spec_loader import load_spec
from rackcert.report.assemble import assemble
from rackcert.report.html import render_html

REPO = Path(__file__).resolve().parents[1]
EVIDENCE = REPO / "docs" / "evidence"


@pytest.fixture
def h200_run(tmp_path):
    for name in ("h200-validate.json", "h200-bench.json"):
        if not (EVIDENCE / name).is_file():
            pytest.fail(f"docs/evidence/{name} is missing: the report test reads the real record")
    loaded = load_spec(REPO / "inventories" / "h200-local.yaml")
    run = RunDir.create(tmp_path / "runs", loaded.spec.metadata.name, loaded.sha256, loaded.text)
    shutil.copy(EVIDENCE / "h200-validate.json", run.path / "validate.json")
    bench = json.loads((EVIDENCE / "h200-bench.json").read_text())
    # The bench evidence was recorded against the R750xa spec; file it under this run's spec.
    bench["spec_sha256"] = loaded.sha256
    (run.path / "bench.json").write_text(json.dumps(bench))
    return run


REF = "dell-r750xa-a100-esxi703"


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


def test_h200_evidence_renders(h200_run):
    rec = assemble(h200_run, reference=REF)
    html = render_html(rec)
    ips = rec.bench.resnet50.points[0].images_per_sec
    assert f"{ips:,.2f}" in html
    assert html.count("<svg") == 2
    if rec.bench.allreduce.note:
        assert rec.bench.allreduce.note.split(":")[0] in html
    assert "not shown: this benchmark did not run on the reference's GPU model" in html
