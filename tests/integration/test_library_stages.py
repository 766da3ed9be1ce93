"""A library user runs the stages from Python, below the CLI (as docs/architecture.md shows).

Each stage package has `run(loaded_spec, run_dir, **options)` returning its typed record:
plan and provision against the vcsim twin, bench with everything skipped (INCOMPLETE),
then the report, all in one run directory, none of it through typer.
"""

from __future__ import annotations

import provision
import rackcert.report
import validation.bench
from rackcert.core.runs import RunDir
from rackcert.core.spec_loader import load_spec
from rackcert.core.stage_records import BenchRecord, PlanRecord, ProvisionRecord, ReportRecord


def test_stages_run_from_python_and_return_typed_records(rack_twin, tmp_path):
    lab = rack_twin("inventories/lab.yaml", guests=True)
    loaded = load_spec(lab.spec_path)
    run = RunDir.create(tmp_path / "runs", loaded.spec.metadata.name, loaded.sha256, loaded.text)

    plan = provision.run_plan(loaded, run)
    assert isinstance(plan, PlanRecord) and plan.status == "ok"
    assert plan.spec_sha256 == loaded.sha256
    assert {a.kind for a in plan.data.actions} >= {"host.ats", "vm.clone"}

    asked: list[int] = []
    done = provision.run(loaded, run, confirm=lambda actions: asked.append(len(actions)) or True)
    assert isinstance(done, ProvisionRecord) and done.status == "ok"
    assert asked == [len(plan.data.actions)] and len(done.data.done) == len(plan.data.actions)
    assert provision.run_plan(loaded, run).data.actions == []  # idempotent

    bench = validation.bench.run(loaded, run, local=True, skip={"allreduce", "resnet", "storage"})
    assert isinstance(bench, BenchRecord) and bench.data.verdict is not None
    assert bench.data.verdict.verdict == "INCOMPLETE"

    report = rackcert.report.run(loaded, run, formats=("json",))
    assert isinstance(report, ReportRecord)
    assert report.data.verdict == "INCOMPLETE"
    assert "stage validate not recorded" in report.data.reasons
    assert any(line.startswith("bench allreduce.correct") for line in report.data.not_judged)
