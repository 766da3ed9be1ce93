"""`rackcert bootstrap` and `rackcert demo`: the six stages as one resumable flow.

Each stage is the same function its own command runs, pointed at one run
directory. Two kinds of failure are told apart: a stage that could not do its
work (vCenter refused a task, Ansible failed a host) stops the flow, while
validate and bench that ran and recorded failing checks are evidence, not
breakage, so the flow goes on and the report judges. The report is written
whatever happened, from what was recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rackcert.cli.common import RunsRootOpt, SpecArg, app, console, default_runs_root, load
from rackcert.errors import InputError, RackcertError
from rackcert.pipeline import PipelineResult, Stage, run_pipeline
from rackcert.runs import RunDir

JUDGING_STAGES = ("validate", "bench")


def _judging(name: str, fn, stage_started: dict[str, str]):  # noqa: ANN001, ANN202
    """Wrap validate/bench: failing checks that were recorded do not stop the flow."""

    def run(run_dir: RunDir) -> None:
        from rackcert.runs import utc_now

        started = utc_now()
        try:
            fn(run_dir)
        except (RackcertError, typer.Exit) as exc:
            record = run_dir.read_stage(name) or {}
            recorded_now = record.get("finished_at", "") >= started and record.get("data")
            if not recorded_now:
                if isinstance(exc, RackcertError):
                    raise
                raise RackcertError(f"{name} failed without a record") from None
            console.print(f"[yellow]{name} recorded failing checks; the report will judge[/]")
        stage_started[name] = started

    return run


def build_stages(
    spec_path: Path,
    *,
    yes: bool,
    power_cycle: bool,
    quick: bool,
    local_bench: bool,
    backend: str = "auto",
) -> tuple[list[Stage], Stage]:
    """The six stages of the design, each calling the command of the same name."""
    from rackcert.cli.bench_cmds import bench
    from rackcert.cli.configure_cmds import configure_cmd
    from rackcert.cli.provision_cmds import plan_cmd, provision_cmd
    from rackcert.cli.validate_cmds import validate_cmd

    started: dict[str, str] = {}

    def plan(run: RunDir) -> None:
        plan_cmd(spec_path, run=run.path)

    def provision(run: RunDir) -> None:
        provision_cmd(spec_path, yes=yes, power_cycle=power_cycle, run=run.path)

    def configure(run: RunDir) -> None:
        configure_cmd(spec_path, run=run.path)

    def validate(run: RunDir) -> None:
        validate_cmd(spec_path, run=run.path)

    def bench_stage(run: RunDir) -> None:
        bench(spec_path, quick=quick, local=local_bench, backend=backend, run=run.path)

    def report(run: RunDir) -> None:
        from rackcert.report.build import build_report

        outcome = build_report(run)
        colour = {"PASS": "green", "FAIL": "red"}.get(outcome.verdict, "yellow")
        console.print(f"verdict: [bold {colour}]{outcome.verdict}[/]")
        for reason in outcome.record.verdict.reasons[:8]:
            console.print(f"  - {reason}", soft_wrap=True)

    stages = [
        Stage("plan", plan, "read vCenter, diff with the spec"),
        Stage("provision", provision, "ATS, passthrough, VMs"),
        Stage("configure", configure, "guest stack through Ansible"),
        Stage("validate", _judging("validate", validate, started), "checks on every node"),
        Stage("bench", _judging("bench", bench_stage, started), "allreduce, ResNet50, storage"),
    ]
    return stages, Stage("report", report, "run.json, HTML, PDF, manifest")


def _finish(result: PipelineResult) -> None:
    html = result.run.path / "report.html"
    if html.is_file():
        console.print(f"report: [bold]{html.resolve()}[/]")
    if result.failed:
        assert result.error is not None
        raise result.error
    record = result.run.read_stage("report") or {}
    if (record.get("data") or {}).get("verdict") != "PASS":
        raise typer.Exit(1)


BOOTSTRAP_HELP = (
    "Take a rack from bare to certified: plan, provision, configure, validate, bench, report."
    "\n\nAll stages write into one run directory (runs/<rack>/<timestamp>). A stage that cannot"
    " do its work stops the flow with its own message; the report of what was done is still"
    " written. Failing checks in validate or bench do not stop the flow: the report judges."
    " --resume RUN continues after the last stage recorded ok. Exit 0 only on a PASS verdict."
)


@app.command("bootstrap", help=BOOTSTRAP_HELP)
def bootstrap_cmd(
    spec_path: SpecArg,
    resume: Annotated[
        Path | None,
        typer.Option("--resume", help="Continue this run directory after its last good stage"),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Provision without asking")] = False,
    power_cycle: Annotated[
        bool, typer.Option("--power-cycle", help="Let provision power-cycle VMs in the way")
    ] = False,
    quick: Annotated[bool, typer.Option("--quick", help="Short benchmarks (a path check)")] = False,
    local_bench: Annotated[
        bool, typer.Option("--local-bench", help="Benchmark this machine instead of the VMs")
    ] = False,
    backend: Annotated[
        str,
        typer.Option(
            "--backend", help="Bench engine: auto (Horovod if it imports), nccl, gloo, horovod"
        ),
    ] = "auto",
    runs_dir: RunsRootOpt = None,  # type: ignore[assignment]
) -> None:
    loaded = load(spec_path)
    if resume is not None:
        run = RunDir.open(resume)
        if run.meta.get("spec_sha256") != loaded.sha256:
            raise InputError(
                f"--resume {resume}: that run was made from another version of the spec"
                " (sha256 differs); start a new run instead"
            )
    else:
        run = RunDir.create(
            runs_dir or default_runs_root(), loaded.spec.metadata.name, loaded.sha256, loaded.text
        )
    console.print(f"bootstrap {loaded.spec.metadata.name}: run {run.path}")
    stages, report = build_stages(
        spec_path,
        yes=yes,
        power_cycle=power_cycle,
        quick=quick,
        local_bench=local_bench,
        backend=backend,
    )
    _finish(run_pipeline(stages, run, resume=resume is not None, final=report, console=console))


DEMO_HELP = (
    "The whole flow on the embedded lab, no hardware needed: starts the vcsim rack twin and"
    " the SSH test hosts, bootstraps inventories/lab.yaml (CPU benchmarks) and prints the"
    " path of the HTML report; it benches with Horovod across both hosts, launched from"
    " lab-node1.\n\nThe lab has no GPUs, OFED or InfiniBand: the checks that need"
    " them fail there, honestly, and the verdict says so. Needs root (network namespaces)."
)


@app.command("demo", help=DEMO_HELP)
def demo_cmd(
    keep_lab: Annotated[
        bool, typer.Option("--keep-lab", help="Leave the twin and SSH hosts running afterwards")
    ] = False,
    runs_dir: RunsRootOpt = None,  # type: ignore[assignment]
) -> None:
    from rackcert.cli.lab_cmds import down, up
    from rackcert.paths import inventories_dir

    spec_path = inventories_dir() / "lab.yaml"
    down(spec_path)
    up(spec_path)
    try:
        # Horovod across both hosts (auto: it imports in the nodes' environment), horovodrun
        # started on lab-node1 with the spec's data interface (eth0 on every node).
        bootstrap_cmd(spec_path, yes=True, quick=True, backend="auto", runs_dir=runs_dir)
    finally:
        if not keep_lab:
            down(spec_path)
