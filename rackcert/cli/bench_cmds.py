"""`rackcert bench`: allreduce sweep, ResNet50 weak scaling and storage reads, judged.

Wires the spec and the run directory to validation.bench (imported lazily: torch is heavy
and `rackcert --help` must stay fast).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rackcert.cli.common import (
    JsonOpt,
    MetricsTextfileOpt,
    RunOpt,
    RunsRootOpt,
    SpecArg,
    app,
    console,
    default_runs_root,
    load,
    open_or_create_run,
    print_json,
)
from rackcert.cli.deferred import deferred_command
from rackcert.cli.display import show_bench
from rackcert.cli.unit_options import skip_list, with_unit_options
from rackcert.core.errors import InputError

if TYPE_CHECKING:
    from rackcert.core.runs import RunDir
    from rackcert.core.spec import Spec
    from rackcert.core.stage_records import LocaliseRecord


def skip_help() -> str:
    """--skip's help: the benchmarks' words (unit_options.skip_list)."""
    return f"Comma list of {skip_list()} to leave out"


def _ints(text: str | None, flag: str) -> list[int] | None:
    if text is None:
        return None
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"{flag} {text!r}: want comma-separated integers, e.g. 1,2,4") from None
    if not values or any(v < 1 for v in values):
        raise InputError(f"{flag} {text!r}: want positive integers, e.g. 1,2,4")
    return values


def _names(text: str | None) -> list[str] | None:
    return [v.strip() for v in text.split(",") if v.strip()] if text else None


@deferred_command(app, "bench")
@with_unit_options  # each benchmark's own options, from its unit's declarations
def bench(
    spec_path: SpecArg,
    local: Annotated[
        bool,
        typer.Option(
            "--local",
            help="Run on this machine: one process per GPU (torchrun --standalone),"
            " or 2 Gloo CPU processes when there is no GPU",
        ),
    ] = False,
    nodes: Annotated[
        str | None,
        typer.Option("--nodes", help="Node counts to sweep, e.g. 1,2,4 (default: doubling)"),
    ] = None,
    gpus: Annotated[
        str | None,
        typer.Option(
            "--gpus", help="With --local: GPU counts to sweep, e.g. 1,2,4,8 (default: doubling)"
        ),
    ] = None,
    vms: Annotated[
        str | None,
        typer.Option(
            "--vms",
            help="Bench nodes by VM name (default: the first VM's template, one VM per host)",
        ),
    ] = None,
    gpus_per_node: Annotated[
        int | None,
        typer.Option(
            "--gpus-per-node", min=1, help="Ranks per node (default: the template's GPUs)"
        ),
    ] = None,
    backend: Annotated[
        str,
        typer.Option(
            "--backend",
            help="auto (Horovod if it imports, else torch.distributed), nccl, gloo or horovod",
        ),
    ] = "auto",
    quick: Annotated[
        bool, typer.Option("--quick", help="Small sizes and few steps: a path check")
    ] = False,
    skip: Annotated[
        str | None,
        typer.Option("--skip", help=skip_help()),
    ] = None,
    known_hosts: Annotated[
        Path | None,
        typer.Option("--known-hosts", help="known_hosts file pinning the nodes' SSH keys"),
    ] = None,
    remote_python: Annotated[
        str | None, typer.Option("--remote-python", help="Python on the nodes (default: this one)")
    ] = None,
    remote_dir: Annotated[
        str | None,
        typer.Option("--remote-dir", help="rackcert checkout on the nodes (default: this one)"),
    ] = None,
    rdzv_port: Annotated[
        int | None,
        typer.Option(
            "--rdzv-port",
            help="c10d rendezvous port on node 1 (default: the first port of the spec's"
            " network.firewall.launcher_port_range, 29400)",
        ),
    ] = None,
    image: Annotated[
        str, typer.Option("--image", help="Container image for the Kubernetes manifests")
    ] = "rackcert-bench:latest",
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per launch")] = 1800.0,
    launcher: Annotated[
        str,
        typer.Option(
            "--launcher",
            help="Across nodes: auto (horovodrun for Horovod, torchrun otherwise), torchrun,"
            " horovodrun, mpirun (started on the first node) or srun (a Slurm job: the spec's"
            " slurm block)",
        ),
    ] = "auto",
    reservation: Annotated[
        str | None,
        typer.Option("--reservation", help="With --launcher srun: run inside this reservation"),
    ] = None,
    network_interface: Annotated[
        str | None,
        typer.Option(
            "--network-interface",
            help="The nodes' data interface for horovodrun/mpirun (default: network.interface)",
        ),
    ] = None,
    drain: Annotated[
        bool,
        typer.Option(
            "--drain",
            help="Drain in Slurm each node the verdict names (reason 'rackcert: <finding>'),"
            " resume the ones an earlier --drain drained that are clean now; an operator's"
            " drain is never touched (needs the spec's slurm block)",
        ),
    ] = False,
    localise: Annotated[
        bool,
        typer.Option(
            "--localise",
            help="After the bench, name the slow node, GPU or link: every node at once,"
            " then every link in rounds of disjoint pairs (iperf3, or ib_write_bw/lat)",
        ),
    ] = False,
    pattern: Annotated[
        str,
        typer.Option(
            "--pattern",
            help="With --localise: round-robin (every pair in n-1 rounds), ring, all-pairs"
            " or k-batch",
        ),
    ] = "round-robin",
    k_batch: Annotated[
        int, typer.Option("--k-batch", min=1, help="With --pattern k-batch: pairs per round")
    ] = 4,
    pair_seconds: Annotated[
        int, typer.Option("--pair-seconds", min=1, help="With --localise: seconds per pair")
    ] = 2,
    pair_allreduce: Annotated[
        bool | None,
        typer.Option(
            "--pair-allreduce/--no-pair-allreduce",
            help="With --localise: each round's pairs also run a two-rank allreduce"
            " (torch.distributed, NCCL or Gloo), judged per link like bandwidth. Costs one"
            " torch start per node and a 1 MiB x 5 allreduce per round (2-5 s a round on a"
            " busy 2-core machine). Default: on when the per-node stage finds GPUs on"
            " every node",
        ),
    ] = None,
    junit: Annotated[
        Path | None,
        typer.Option("--junit", help="Also write the verdict's checks as JUnit XML here (for CI)"),
    ] = None,
    metrics_textfile: MetricsTextfileOpt = None,
    runs_dir: RunsRootOpt = None,  # type: ignore[assignment]
    run: RunOpt = None,
    as_json: JsonOpt = False,
    *,
    unit_values: dict[str, Any],
) -> None:
    """Benchmark the rack and judge it against spec.certification; writes bench.json.

    Allreduce sweep (8 B .. 1 GiB; algbw, busbw as nccl-tests), ResNet50 synthetic
    weak scaling (images/s per GPU and total, speedup, efficiency), storage random reads,
    Kubeflow PyTorchJob/MPIJob manifests. Exit 0 only on PASS: 1 when the verdict is FAIL
    or INCOMPLETE (a check certification.required names, or every check, was not judged).
    """
    import validation.bench
    from validation.bench.options import BenchOptions
    from validation.bench.orchestrate import require_spec_fits

    if metrics_textfile is not None:
        from rackcert.metrics.textfile import check_target

        check_target(metrics_textfile)
    loaded = load(spec_path)
    opts = BenchOptions(
        local=local,
        gpus=_ints(gpus, "--gpus"),
        nodes=_ints(nodes, "--nodes"),
        vms=_names(vms),
        gpus_per_node=gpus_per_node,
        backend=backend,
        quick=quick,
        skip=set(_names(skip) or []),
        known_hosts=known_hosts,
        remote_python=remote_python,
        remote_dir=remote_dir,
        rdzv_port=rdzv_port,
        image=image,
        timeout_s=timeout,
        launcher=launcher,
        reservation=reservation,
        network_interface=network_interface,
        values={k: v for k, v in unit_values.items() if v is not None},
    )
    require_spec_fits(loaded.spec, opts)  # a choice the spec cannot serve: its own line first
    if drain and loaded.spec.slurm is None:
        raise InputError("--drain drains Slurm nodes: the spec has no slurm block")
    where = None
    if localise or pattern != "round-robin":
        from validation.bench.localisation.stages import options_for

        where = options_for(
            loaded.spec,
            opts,
            pattern=pattern,
            k=k_batch,
            pair_seconds=pair_seconds,
            pair_allreduce=pair_allreduce,
        )
        if local:
            raise InputError(
                "--localise measures nodes and the links between them: not with --local"
            )
    if not local:
        from rackcert.lab.routes import require_lab_up

        require_lab_up(loaded.spec)  # the lab's addresses, with the lab down, lead off the machine
    rundir = open_or_create_run(loaded, runs_dir or default_runs_root(), run)
    say = (lambda _m: None) if as_json else (lambda m: console.print(m, highlight=False))
    record = validation.bench.run(loaded, rundir, opts, progress=say, localise=where)
    if junit is not None and record.data.verdict is not None:
        from validation.junit import write_bench_junit

        write_bench_junit(junit, record.data.verdict)
    drains = _drain(loaded.spec, rundir, record.data.localise, say) if drain else None
    if as_json:
        data = record.data.model_dump(mode="json")
        if drains is not None:
            data["slurm_drains"] = drains
        print_json({"run": str(rundir.path), **data})
    else:
        show_bench(console, record, rundir.path)
    from rackcert.metrics.record_metrics import bench_drift_lines

    root = runs_dir or default_runs_root()
    for line in bench_drift_lines(record, rundir, root, metrics_textfile, quiet=as_json):
        console.print(line, markup=False, soft_wrap=True)
    if record.data.verdict is None or not record.data.verdict.passed:
        raise typer.Exit(1)


def _drain(
    spec: Spec, rundir: RunDir, part: LocaliseRecord | None, say: Callable[[str], None]
) -> list[dict[str, Any]]:
    """--drain after the verdict: what it did, also kept as the run's artifact."""
    import json
    from dataclasses import asdict

    from rackcert.core.localisation import read_localisation
    from rackcert.core.untrusted import markup
    from validation.bench.localisation.drain import RECORD_NAME, drain_named

    loc = read_localisation(part)
    if loc is None:
        say("--drain: this bench recorded no localisation, so no node is named; nothing drained")
        return []
    slurm = spec.slurm
    env = {"SLURM_CONF": slurm.client_conf} if slurm and slurm.client_conf else {}
    record = rundir.path.parent / RECORD_NAME
    actions = drain_named(loc, record=record, env=env, run=rundir.path.name)
    out = [asdict(a) for a in actions]
    (rundir.artifacts("bench") / "slurm-drains.json").write_text(json.dumps(out, indent=2))
    for action in actions:
        say(f"slurm: {action.action} {markup(action.node)}: {markup(action.reason)}")
    return out
