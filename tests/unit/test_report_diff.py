"""`rackcert report diff`: versions, settings, flipped checks, figures beyond spread; exit code."""

from __future__ import annotations

import json

from rackcert.report.assemble import assemble
from rackcert.report.diff import diff_records


def test_same_figures_within_spread_are_not_a_regression(report_runs):
    a = assemble(report_runs())
    b = assemble(report_runs(resnet_scale=0.99))  # -1%: inside 2 x 0.6% spread and the 2% floor
    d = diff_records(a, b)
    assert not d.regressed, d.regressions
    assert all(not m.moved for m in d.figures)
    assert d.versions == [] and d.checks == []


def test_flipped_check_and_setting_change(report_runs):
    run_a = report_runs()
    run_b = report_runs(fail={"nic.ats@mn-node2": "ATS_ENABLED=False(0)"})
    provision = json.loads((run_b.path / "provision.json").read_text())
    vm = provision["data"]["observed_after"]["vms"][1]
    vm["extra_config"]["pciPassthru.64bitMMIOSizeGB"] = "128"
    (run_b.path / "provision.json").write_text(json.dumps(provision))
    d = diff_records(assemble(run_a), assemble(run_b))
    flips = [(f.node, f.check, f.before, f.after, f.kind) for f in d.checks]
    assert flips == [("mn-node2", "nic.ats", "pass", "fail", "regressed")]
    assert [(c.scope, c.key, c.before, c.after) for c in d.settings] == [
        ("mn-node2", "pciPassthru.64bitMMIOSizeGB", "256", "128")
    ]
    assert "check nic.ats on mn-node2: pass -> fail" in d.regressions


def test_matrix_row_that_stops_matching_is_a_regression(report_runs):
    d = diff_records(assemble(report_runs()), assemble(report_runs(driver="535.54.03")))
    assert [(c.key, c.before, c.after) for c in d.matrix] == [
        ("nvidia_driver", "matches", "differs")
    ]
    assert "certified matrix nvidia_driver: matches -> differs" in d.regressions


def test_last_certified_is_the_newest_pass(report_runs):
    from rackcert.core.runs import last_certified
    from rackcert.report.build import build_report

    first = report_runs()
    build_report(first, formats=("json",))
    second = report_runs(bench_passed=False)
    build_report(second, formats=("json",))
    third = report_runs()
    assert last_certified(report_runs.root, "r750xa-4node").path == first.path
    build_report(third, formats=("json",))
    assert last_certified(report_runs.root, "r750xa-4node").path == third.path
    assert last_certified(report_runs.root, "r750xa-4node", before=third.path).path == first.path
    assert last_certified(report_runs.root, "other-rack") is None


def test_diff_against_a_partial_run_does_not_crash(report_runs):
    full, partial = report_runs(), report_runs(stages=("plan",))
    d = diff_records(assemble(full), assemble(partial))
    assert d.verdict == ("PASS", "INCOMPLETE") and "verdict PASS -> INCOMPLETE" in d.regressions
    gone = {f.kind for f in d.checks}
    assert gone == {"gone"} and d.figures == []


def test_last_certified_reads_no_record_of_runs_without_a_verdict(report_runs, monkeypatch):
    # validate runs after every upgrade and looks for the last certified run: the history's
    # validate-only runs (their validate.json grows with the nodes) must not be parsed, and a
    # newer certified run with an unreadable record is passed over as before.
    import rackcert.core.runs
    from rackcert.core.runs import last_certified
    from rackcert.report.build import build_report

    certified = report_runs()
    build_report(certified, formats=("json",))
    broken = report_runs()
    build_report(broken, formats=("json",))
    (broken.path / "bench.json").write_text("{not json")
    later = [report_runs(stages=("validate",)) for _ in range(3)]
    read: list[str] = []
    real = rackcert.core.runs.read_json
    monkeypatch.setattr(rackcert.core.runs, "read_json", lambda p: read.append(str(p)) or real(p))

    assert last_certified(report_runs.root, "r750xa-4node").path == certified.path
    assert not any(str(run.path) in path for run in later for path in read), read
