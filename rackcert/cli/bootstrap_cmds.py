"""`rackcert bootstrap` and `rackcert demo`: the six stages as one resumable flow.

Each stage is its package's entry point (`provision.run_plan`, `provision.run`,
`rackcert.configure.run`, `validation.run`, `validation.bench.run`,
`rackcert.report.run`), the same ones the stage commands call, pointed at one run
directory. Two kinds of failure are told apart: a stage that could not do its
work (vCenter refused a task, Ansible failed a host) raises and stops the flow,
while validate and bench return records of failing checks: evidence, not
breakage, so the flow goes on and the report judges. The report is written
whatever happened, from what was recorded.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rackcert.cli.common import (
    RunsRootOpt,
    SpecArg,
    app,
    confirm_apply,
    console,
    default_runs_root,
    load,
    owned_lab,
)
from rackcert.cli.deferred import deferred_command
from rackcert.cli.display import (
    show_actions,
    show_bench,
    show_configure,
    show_plan,
    show_rehearsal,
    show_run_summary,
    show_validate,
    show_verdict,
)
from rackcert.cli.unit_options import skip_list

if TYPE_CHECKING:
    from rackcert.core.runs import RunDir
    from rackcert.core.spec_loader import LoadedSpec
    from rackcert.core.stage_records import ActionRecord
    from rackcert.pipeline import PipelineResult, Stage


def build_stages(
    loaded: LoadedSpec,
    *,
    yes: bool,
    power_cycle: bool,
    quick: bool,
    local_bench: bool,
    backend: str = "auto",
    runs_root: Path | None = None,
    rehearse: bool = False,
    launcher: str = "auto",
    skip: frozenset[str] = frozenset(),
) -> tuple[list[Stage], Stage]:
    """The six stages of the design, each its package's entry point (`run(loaded, run)`).

    validate and bench return their records whatever the checks said (failing checks are
    evidence; the report judges); a stage raises only when it could not do its work.
    `skip` leaves bench parts out, as `rackcert bench --skip` (bootstrap's --bench-skip).
    """
    import provision
    import rackcert.configure
    import rackcert.report
    import validation
    import validation.bench
    from rackcert.lab.routes import require_lab_up
    from rackcert.pipeline import Stage
    from validation.bench.options import BenchOptions

    root = runs_root or default_runs_root()
    rack = loaded.spec.metadata.name
    planned: list[ActionRecord] | None = None  # what the plan stage showed in this process
    bench_options = BenchOptions(
        local=local_bench, quick=quick, backend=backend, launcher=launcher, skip=set(skip)
    )

    def plan(run: RunDir) -> None:
        nonlocal planned
        record = provision.run_plan(loaded, run)
        planned = list(record.data.actions)
        show_plan(console, record, run.path / "plan.json", rack)

    def on_plan(actions: list[ActionRecord]) -> None:
        # The plan is shown once: by the plan stage, unless it was resumed (not run here) or
        # vCenter changed between the two reads.
        if planned is None:
            show_actions(console, actions, f"provision rack {rack}")
        elif [a.model_dump() for a in actions] != [a.model_dump() for a in planned]:
            show_actions(console, actions, f"provision rack {rack}: changed since the plan")

    def provision_stage(run: RunDir) -> None:
        provision.run(
            loaded,
            run,
            yes=yes,
            power_cycle=power_cycle,
            confirm=confirm_apply,
            on_plan=on_plan,
            guard=_rehearsed_guard(run, loaded) if rehearse else None,
        )

    def configure(run: RunDir) -> None:
        require_lab_up(loaded.spec)  # provision made the lab's hosts; SSH only to them
        record = rackcert.configure.run(loaded, run)
        show_configure(console, record, run.path / "configure.json")

    def validate(run: RunDir) -> None:
        require_lab_up(loaded.spec)
        record = validation.run(loaded, run, runs_root=root)
        junit = run.artifacts("validate") / "junit.xml"
        show_validate(console, record, run.path / "validate.json", junit)

    def bench_stage(run: RunDir) -> None:
        say = lambda m: console.print(m, highlight=False, markup=False)  # noqa: E731
        if not local_bench:
            require_lab_up(loaded.spec)
        record = validation.bench.run(loaded, run, bench_options, progress=say)
        show_bench(console, record, run.path)

    def report(run: RunDir) -> None:
        show_verdict(console, rackcert.report.run(loaded, run))

    stages = [
        *([_rehearsal_stage(loaded, power_cycle)] if rehearse else []),
        Stage("plan", plan, "read vCenter, diff with the spec"),
        Stage("provision", provision_stage, "ATS, passthrough, VMs"),
        Stage("configure", configure, "guest stack through Ansible"),
        Stage("validate", validate, "checks on every node"),
        Stage("bench", bench_stage, "allreduce, ResNet50, storage"),
    ]
    return stages, Stage("report", report, "run.json, HTML, PDF, manifest")


def _rehearsal_stage(loaded: LoadedSpec, power_cycle: bool) -> Stage:
    """bootstrap --rehearse: the rehearsal as the first stage; a refusal stops the flow."""
    from rackcert.core.errors import RackcertError
    from rackcert.pipeline import Stage
    from rackcert.rehearse import rehearse
    from rackcert.report.rehearsal import line

    def run_it(run: RunDir) -> None:
        say = lambda m: console.print(m, markup=False, emoji=False, highlight=False)  # noqa: E731
        record = rehearse(loaded, run, power_cycle=power_cycle, say=say)
        show_rehearsal(console, record.data, run.path / "rehearsal.json")
        if record.data.refusals or record.data.second_plan:
            raise RackcertError(f"rehearsal: {line(record.data)}: nothing touched the real hosts")

    return Stage("rehearsal", run_it, "provision a twin of the vCenter first")


def _rehearsed_guard(run: RunDir, loaded: LoadedSpec) -> Any:
    """bootstrap --rehearse: provision acts only on the inventory the rehearsal captured."""
    from rackcert.rehearse import check_rehearsed

    return check_rehearsed(run.path, loaded)


def _finish(result: PipelineResult, *, lab: bool = False) -> None:
    show_run_summary(console, result, lab=lab)
    if result.failed:
        assert result.error is not None
        raise result.error
    record = result.run.read_record("report")
    if record is None or getattr(record.data, "verdict", None) != "PASS":
        raise typer.Exit(1)


BOOTSTRAP_HELP = (
    "Take a rack from bare to certified: plan, provision, configure, validate, bench, report."
    "\n\nAll stages write into one run directory (runs/<rack>/<timestamp>). A stage that cannot"
    " do its work stops the flow with its own message; the report of what was done is still"
    " written. Failing checks in validate or bench do not stop the flow: the report judges."
    " --resume RUN continues after the last stage recorded ok. Exit 0 only on a PASS verdict."
)


@deferred_command(app, "bootstrap", help=BOOTSTRAP_HELP)
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
    rehearse: Annotated[
        bool,
        typer.Option(
            "--rehearse",
            help="First provision a twin of the vCenter (rackcert rehearse); stop on a refusal",
        ),
    ] = False,
    launcher: Annotated[
        str,
        typer.Option(
            "--launcher", help="Bench launcher: auto, torchrun, horovodrun, mpirun or srun (Slurm)"
        ),
    ] = "auto",
    bench_skip: Annotated[
        str | None,
        typer.Option(
            "--bench-skip",
            help="Bench parts to leave out, as `rackcert bench --skip`: comma list of"
            f" {skip_list()} (the report says what was not judged)",
        ),
    ] = None,
    runs_dir: RunsRootOpt = None,  # type: ignore[assignment]
) -> None:
    _bootstrap(
        load(spec_path),
        resume=resume,
        yes=yes,
        power_cycle=power_cycle,
        quick=quick,
        local_bench=local_bench,
        backend=backend,
        runs_dir=runs_dir,
        rehearse=rehearse,
        launcher=launcher,
        skip=_bench_parts(bench_skip),
    )


def _bench_parts(text: str | None) -> frozenset[str]:
    """--bench-skip's comma list, each a part `rackcert bench --skip` knows, or one line."""
    from validation.bench.units import check_skip

    parts = frozenset(v.strip() for v in (text or "").split(",") if v.strip())
    check_skip(parts, "--bench-skip")
    return parts


def _bootstrap(
    loaded: LoadedSpec,
    *,
    resume: Path | None,
    yes: bool,
    power_cycle: bool,
    quick: bool,
    local_bench: bool,
    backend: str,
    runs_dir: Path | None,
    lab: bool = False,
    rehearse: bool = False,
    launcher: str = "auto",
    skip: frozenset[str] = frozenset(),
) -> None:
    """One load of the spec for the whole flow: the stages, the run and the summary.

    The stages are built first: a bad option is its one line before a run directory exists.
    """
    from rackcert.core.runs import RunDir
    from rackcert.pipeline import run_pipeline

    stages, report = build_stages(
        loaded,
        yes=yes,
        power_cycle=power_cycle,
        quick=quick,
        local_bench=local_bench,
        backend=backend,
        runs_root=runs_dir,
        rehearse=rehearse,
        launcher=launcher,
        skip=skip,
    )
    if resume is not None:
        run = RunDir.open(resume, spec_sha256=loaded.sha256)
    else:
        run = RunDir.create(
            runs_dir or default_runs_root(), loaded.spec.metadata.name, loaded.sha256, loaded.text
        )
    console.print(f"bootstrap {loaded.spec.metadata.name}: run {run.path}", markup=False)
    result = run_pipeline(stages, run, resume=resume is not None, final=report, console=console)
    _finish(result, lab=lab)


DEMO_HELP = (
    "The whole flow on the embedded lab, no hardware needed: starts the vcsim rack twin and"
    " the lab's guest agent, bootstraps inventories/lab.yaml (provision clones the VMs from the"
    " twin's template and powers them on, and the agent brings up an SSH test host for each;"
    " CPU benchmarks with Horovod across both hosts, launched from lab-node1) and prints the"
    " path of the HTML report. While Horovod is not in the lab nodes' image yet (set-up builds"
    " it in the background), the bench runs on torch.distributed over Gloo and the demo says,"
    " first and last, that the Horovod path was not run."
    "\n\nThe lab has no GPUs, OFED or InfiniBand: the checks that need"
    " them fail there, honestly, and the verdict says so. Needs root (network namespaces)."
    "\n\nCtrl-C, SIGTERM or SIGHUP stops the demo and its lab (twin, guest agent, SSH hosts,"
    " Slurm) within seconds; a lab left by a demo that was killed outright is cleared by the"
    " next run, which says so in one line."
)


@app.command("demo", help=DEMO_HELP)
def demo_cmd(
    keep_lab: Annotated[
        bool, typer.Option("--keep-lab", help="Leave the twin and SSH hosts running afterwards")
    ] = False,
    slurm: Annotated[
        bool,
        typer.Option(
            "--slurm",
            help="Certify through a real Slurm: lab up --slurm, the nodes join it (configure's"
            " slurm_node role), the bench runs as srun jobs (Gloo ranks)",
        ),
    ] = False,
    runs_dir: RunsRootOpt = None,  # type: ignore[assignment]
) -> None:
    from rackcert.cli.lab_cmds import down, up
    from rackcert.core.paths import inventories_dir

    spec_path = inventories_dir() / "lab.yaml"
    # The demo owns its lab (a signal stops it, a dead demo's lab is cleared by the next run);
    # with --keep-lab the lab is the user's to stop (`rackcert lab down`), signal or not.
    with contextlib.nullcontext() if keep_lab else owned_lab("rackcert demo"):
        down(spec_path)
        certify, left_out = _demo_spec(spec_path)
        slurm_spec = up(certify, slurm=slurm)
        try:
            # Horovod across both hosts (auto: it imports in the nodes' environment), horovodrun
            # started on lab-node1 with the spec's data interface (eth0 on every node). Under
            # Slurm, srun places torch.distributed ranks over Gloo, rank and rendezvous from
            # Slurm's task environment (`bench --launcher srun --backend horovod` runs Horovod
            # over MPI instead; the demo keeps to Gloo ranks, the quickest to start). Without
            # Horovod in the image (yet): torch.distributed over Gloo, launched by torchrun.
            _bootstrap(
                load(slurm_spec or certify),
                resume=None,
                yes=True,
                power_cycle=False,
                quick=True,
                local_bench=False,
                backend="gloo" if slurm_spec or left_out else "auto",
                runs_dir=runs_dir,
                lab=True,
                launcher="srun" if slurm_spec else "auto",
            )
        except typer.Exit:
            _say_left_out(left_out)
            raise
        else:
            _say_left_out(left_out)
        finally:
            if not keep_lab:
                down(spec_path)


def _demo_spec(spec_path: Path) -> tuple[Path, str | None]:
    """The spec the demo certifies, and what it leaves out (None: nothing).

    The lab spec asks for Horovod (guest.horovod). Set-up builds Horovod from source in the
    background (minutes on 2 cores) after laying the nodes' image without it, so that a
    newcomer's first demo need not wait: while Horovod is not in the image, the demo
    certifies the lab spec with guest.horovod off (written beside the lab's state, recorded
    as the run's spec) and says, first and last, that the Horovod path was not run.
    """
    from rackcert.lab import dlstack
    from rackcert.lab.sshhosts.lab import lab_state_dir

    loaded = load(spec_path)
    if not loaded.spec.guest.horovod or not dlstack.lacks("horovod"):
        return spec_path, None
    out = dlstack.spec_without_horovod(spec_path, lab_state_dir(loaded.spec))
    note = (
        "not run: the Horovod path (guest.horovod: horovodrun and hvd.allreduce across the"
        " nodes). Horovod is not in the lab nodes' image yet: set-up builds it in the"
        " background (.venv/log/test-tools.log). This run certified the lab without it"
        f" ({out.name}), its bench on torch.distributed over Gloo; `rackcert demo` runs the"
        " Horovod path once that build is done."
    )
    console.print(
        "demo: Horovod is not in the lab nodes' image yet (set-up is building it in the"
        " background): the bench runs on torch.distributed over Gloo, the Horovod path is"
        " left out of this run",
        markup=False,
        highlight=False,
    )
    return out, note


def _say_left_out(note: str | None) -> None:
    if note:
        console.print(note, markup=False, highlight=False)
