"""run.json: assembled from stage files, schema-checked, verdict combined from recorded verdicts."""

from __future__ import annotations

import json

import pytest

from rackcert.core.runs import RunDir
from rackcert.report.assemble import assemble
from rackcert.report.html import render_html
from rackcert.report.record import json_schema
from tests.support.report_record import SCHEMA


def test_checked_in_schema_is_current():
    assert json.loads(SCHEMA.read_text()) == json_schema(), (
        "schemas/run.schema.json is stale: regenerate it with"
        " `rackcert report schema > schemas/run.schema.json`"
    )


def test_partial_run_is_incomplete_and_says_what_is_missing(report_runs):
    run = report_runs(stages=("plan", "validate"))
    rec = assemble(run)
    assert rec.verdict.verdict == "INCOMPLETE"
    assert rec.missing_stages == ["provision", "configure", "bench"]
    assert "stage bench not recorded" in rec.verdict.reasons
    assert rec.bench.resnet50 is None and rec.hardware.hosts  # plan's discovery is used


def test_run_with_only_meta_is_incomplete(report_runs):
    run = report_runs(stages=())
    rec = assemble(run)
    assert rec.verdict.verdict == "INCOMPLETE"
    assert set(rec.verdict.reasons) >= {"stage validate not recorded", "stage bench not recorded"}
    assert rec.hardware.hosts == [] and rec.checks == []
    assert all(r.status == "unknown" for r in rec.matrix.rows)


def test_failed_check_fails_the_run_with_its_reason(report_runs):
    run = report_runs(fail={"storage.mount@mn-node3": "not mounted"})
    rec = assemble(run)
    assert rec.verdict.verdict == "FAIL"
    assert "check storage.mount on mn-node3: saw not mounted, expected /mnt/data nfs vers=3" in (
        rec.verdict.reasons
    )


def test_bench_verdict_is_taken_as_recorded_not_rejudged(report_runs):
    # Figures far below the spec's 2500 img/s per GPU, but bench recorded a pass: the report
    # shows bench's verdict, it does not re-judge figures.
    passed = assemble(report_runs(resnet_scale=0.5, bench_passed=True))
    assert passed.verdict.verdict == "PASS"
    failed = assemble(report_runs(bench_passed=False))
    assert failed.verdict.verdict == "FAIL"
    assert any(r.startswith("bench: resnet50.images_per_gpu") for r in failed.verdict.reasons)


def test_unreadable_stage_and_foreign_spec_are_reported_not_crashed(report_runs):
    run = report_runs()
    (run.path / "configure.json").write_text("{ not json")
    bench = json.loads((run.path / "bench.json").read_text())
    bench["data"]["resnet50"] = {"points": "nonsense"}
    (run.path / "bench.json").write_text(json.dumps(bench))
    validate = json.loads((run.path / "validate.json").read_text())
    validate["spec_sha256"] = "0" * 64
    (run.path / "validate.json").write_text(json.dumps(validate))
    rec = assemble(run)
    stages = {s.stage: s for s in rec.stages}
    assert stages["configure"].status == "unreadable"
    assert stages["bench"].status == "unreadable"
    assert stages["validate"].spec_sha256_matches is False
    assert rec.verdict.verdict == "INCOMPLETE"
    reasons = " | ".join(rec.verdict.reasons)
    assert "stage configure is unreadable" in reasons
    assert "stage validate was recorded for a different spec" in reasons
    assert "stage bench is unreadable: bench.json does not fit its schema: data.resnet50" in reasons


def test_a_key_no_model_names_is_refused_before_anything_is_written(report_runs):
    from rackcert.core.errors import RecordError

    run = report_runs(stages=("validate", "bench"))
    # the "ansible stats" shape the report once read and configure never wrote
    with pytest.raises(RecordError, match=r"configure.json not written: data.ok: Extra inputs"):
        run.write_stage("configure", {"ok": {"mn-node1": 40}, "dark": {"mn-node2": 1}})
    assert not (run.path / "configure.json").exists()


def test_failed_configure_host_shows_its_task_messages(report_runs):
    from rackcert.core.stage_records import ConfigureHost, TaskProblem

    run = report_runs(stages=("validate", "bench"))
    bad = ConfigureHost(name="mn-node1", ok=40, changed=2, failed=1, status="failed")
    problem = TaskProblem(task="install driver", role="nvidia_driver", message="install failed")
    bad.failures.append(problem)
    gone = ConfigureHost(name="mn-node2", unreachable=True, status="unreachable")
    run.write_stage(
        "configure",
        {"hosts": {h.name: h.model_dump() for h in (bad, gone)}},
        status="failed",
        error="mn-node1: task nvidia_driver : install failed",
    )
    rec = assemble(RunDir.open(run.path))
    by_host = {c.host: c for c in rec.configure}
    assert by_host["mn-node1"].failed == 1 and by_host["mn-node1"].changed == 2
    assert by_host["mn-node1"].messages == ["install driver: install failed"]
    assert by_host["mn-node2"].unreachable == 1
    assert rec.verdict.verdict == "FAIL"
    assert "stage configure failed: mn-node1: task nvidia_driver : install failed" in (
        rec.verdict.reasons
    )


def test_nvlink_pairs_are_what_the_passing_nvlink_check_saw(report_runs):
    pairs = assemble(report_runs()).hardware.nvlink_pairs
    assert [p.node for p in pairs] == ["mn-node1", "mn-node2", "mn-node3", "mn-node4"]
    assert {p.source for p in pairs} == {"check gpu.nvlink.active"}


def test_failed_warning_check_does_not_fail_the_run(report_runs):
    run = report_runs()
    validate = json.loads((run.path / "validate.json").read_text())
    for r in validate["data"]["results"]:
        if r["id"] == "time.sync":
            r.update(status="fail", observed="neither timedatectl nor chronyc answered")
    (run.path / "validate.json").write_text(json.dumps(validate))
    rec = assemble(run)
    assert rec.check_counts.failed == 1
    assert rec.verdict.verdict == "PASS"


def test_after_upgrade_run_uses_the_discovery_validate_referenced(report_runs):
    bootstrap = report_runs()
    later = report_runs(stages=("validate", "bench"))
    validate = json.loads((later.path / "validate.json").read_text())
    validate["data"]["hypervisor_source"] = str(bootstrap.path / "provision.json")
    (later.path / "validate.json").write_text(json.dumps(validate))
    rec = assemble(later)
    assert rec.verdict.verdict == "PASS"  # plan/provision/configure are not required
    assert len(rec.hardware.hosts) == 4
    assert rec.hardware.source.startswith(f"run {bootstrap.path.name}/provision.json, referenced")
    assert {r.component: r.status for r in rec.matrix.rows}["esxi_version"] == "matches"
    validate["data"]["hypervisor_source"] = "/nonexistent/provision.json"
    (later.path / "validate.json").write_text(json.dumps(validate))
    assert assemble(later).hardware.hosts == []


def test_incomplete_bench_makes_the_run_incomplete_and_says_what_was_not_judged(report_runs):
    run = report_runs()
    rec = json.loads((run.path / "bench.json").read_text())
    data = rec["data"]
    data.pop("allreduce")  # as `rackcert bench --skip allreduce` records it
    from rackcert.core.spec_loader import load_spec
    from validation.bench.verdict import rejudge

    spec = load_spec(run.path / "spec.yaml").spec
    data["verdict"] = rejudge(spec, data).model_dump(mode="json")
    run.write_stage("bench", data)
    out = assemble(run)
    assert out.verdict.verdict == "INCOMPLETE"
    assert "bench: allreduce.busbw_fraction (required) not judged: allreduce not run" in (
        out.verdict.reasons
    )
    assert "bench allreduce.correct: allreduce not run" in out.verdict.not_judged
    html = render_html(out)
    assert 'id="not-judged"' in html and "allreduce.correct: allreduce not run" in html


def test_pass_lists_what_passed_next_to_what_was_not_judged(report_runs):
    rec = assemble(report_runs())
    assert rec.verdict.verdict == "PASS"
    assert any(r.startswith("bench: resnet50.images_per_gpu passed: ") for r in rec.verdict.reasons)
    assert rec.verdict.not_judged == []
