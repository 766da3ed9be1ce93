"""`rackcert burnin`: hours of load on every GPU, link and port, watched; the parts to send back.

Wires the spec and the run directory to validation.bench.burnin (imported lazily: torch and
the bench are heavy and `rackcert --help` must stay fast).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

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
from rackcert.core.errors import InputError


@app.command("burnin")
def burnin(
    spec_path: SpecArg,
    duration: Annotated[
        str | None,
        typer.Option("--duration", help="How long every load runs: 4h, 30m, 600s (default 4h)"),
    ] = None,
    quick: Annotated[
        bool, typer.Option("--quick", help="Minutes, not hours (default 2 minutes)")
    ] = False,
    show_plan: Annotated[
        bool, typer.Option("--plan", help="Print what runs where and for how long; run nothing")
    ] = False,
    drain: Annotated[
        bool,
        typer.Option(
            "--drain",
            help="Under Slurm: drain each node a finding names, with the finding as its reason"
            " (an operator's drain is never touched; needs the spec's slurm block)",
        ),
    ] = False,
    mix: Annotated[
        str,
        typer.Option("--mix", help="Loads to run: gpu,node-allreduce,rack-allreduce,pairs"),
    ] = "gpu,node-allreduce,rack-allreduce,pairs",
    interval: Annotated[
        float, typer.Option("--interval", min=0.1, help="The sampler's period, seconds")
    ] = 1.0,
    pairs_every: Annotated[
        str, typer.Option("--pairs-every", help="How often the pair rounds run (1h)")
    ] = "1h",
    sbe_max: Annotated[
        int, typer.Option("--sbe-max", min=0, help="New single-bit ECC errors a GPU may gather")
    ] = 10,
    vms: Annotated[
        str | None, typer.Option("--vms", help="Comma list of VMs (default: the first template's)")
    ] = None,
    known_hosts: Annotated[
        Path | None,
        typer.Option("--known-hosts", help="known_hosts file pinning the nodes' SSH keys"),
    ] = None,
    remote_python: Annotated[
        str | None,
        typer.Option("--remote-python", help="Python on the nodes (default: the DL venv's)"),
    ] = None,
    launcher: Annotated[
        str | None,
        typer.Option("--launcher", help="ssh or srun (default: srun where the spec has Slurm)"),
    ] = None,
    as_json: JsonOpt = False,
    run: RunOpt = None,
    runs_dir: RunsRootOpt = Path("runs"),
    metrics_textfile: MetricsTextfileOpt = None,
) -> None:
    """Burn in a rack: GEMM at the power cap and HBM patterns on every GPU, allreduce loops per
    node and across nodes, pair rounds hourly, all at once; a sampler records clocks, power,
    temperature, clocks-event reasons and GEMM rate every second; ECC, remapped rows, XIDs,
    PCIe replays, NVLink and IB port counters before and after. Findings name the GPU serial
    and PCI address, the port or the link. Exit 0 only when nothing is named."""
    from validation.bench.burnin import BurninOptions, nodes_for, pairs_line_rate, plan, run_into
    from validation.bench.burnin.judge import Rules
    from validation.bench.burnin.nccl import spec_has_rdma
    from validation.bench.burnin.stage import parse_duration
    from validation.bench.localisation.stages import options_for
    from validation.bench.options import BenchOptions
    from validation.bench.targets import remote_python as node_python
    from validation.bench.transport import SrunTarget

    loaded = load(spec_path)
    spec = loaded.spec
    if drain and spec.slurm is None:
        raise InputError("--drain drains Slurm nodes: the spec has no slurm block")
    how = launcher or ("srun" if spec.slurm is not None else "ssh")
    if how not in ("ssh", "srun"):
        raise InputError(f"--launcher {how!r}: ssh or srun")
    if how == "srun" and spec.slurm is None:
        raise InputError("--launcher srun runs Slurm job steps: the spec has no slurm block")
    bench = BenchOptions(
        vms=[v.strip() for v in vms.split(",") if v.strip()] if vms else None,
        known_hosts=known_hosts,
        remote_python=remote_python,
        launcher="srun" if how == "srun" else "auto",
    )
    nodes = nodes_for(spec, bench.vms, bench)
    template = spec.template(spec.vms[0].template) if spec.vms else None
    rate, source = pairs_line_rate(spec, len(nodes))
    slurm = (
        SrunTarget(partition=spec.slurm.partition, immediate_s=spec.slurm.job_timeout_s,
                   client_conf=spec.slurm.client_conf)
        if how == "srun" and spec.slurm is not None else None
    )  # fmt: skip
    kw: dict[str, Any] = {
        "mix": tuple(m.strip() for m in mix.split(",") if m.strip()),
        "interval_s": interval,
        "pairs_every_s": parse_duration(pairs_every),
        "python": node_python(spec, bench),
        "gpus_per_node": (template.gpus or 0) if template else 0,
        "rdma": spec_has_rdma(spec),
        "launcher": how,
        "slurm": slurm,
        # the rack's median judges the pairs; on two nodes (one link) the line rate does
        "localise": options_for(spec, bench, stages={"links"}, line_rate_gbps=rate,
                                line_rate_source=source, confirm=True),
    }  # fmt: skip
    if duration is not None:
        kw["duration_s"] = parse_duration(duration)
    opts = BurninOptions.quick_of(**kw) if quick else BurninOptions(**kw)
    rules = Rules(
        median_fraction=spec.certification.median_fraction_min,
        sbe_new_max=sbe_max,
        window_s=opts.rules.window_s,
    )
    opts.rules = rules
    if show_plan:
        rows = plan(nodes, opts)
        if as_json:
            print_json({"plan": rows})
            return
        for r in rows:
            console.print(f"{r['load']:<15} {r['how_long']:<28} {r['where']}", markup=False)
            console.print(f"{'':<15} {r['what']}", markup=False)
        return
    if metrics_textfile is not None:
        from rackcert.metrics.textfile import check_target

        check_target(metrics_textfile)
    from rackcert.lab.routes import require_lab_up

    require_lab_up(spec)
    rundir = open_or_create_run(loaded, runs_dir or default_runs_root(), run)
    from rackcert.core.known_hosts import rack_file
    from rackcert.core.runs import runs_root_of

    recorded = rack_file(spec, runs_root_of(rundir))  # the rack's pinned or enrolled keys
    if known_hosts is None and recorded.is_file():
        bench.known_hosts = recorded
        nodes = nodes_for(spec, bench.vms, bench)
    say = (lambda _m: None) if as_json else (lambda m: console.print(m, markup=False))
    record = run_into(spec, rundir, nodes, opts, progress=say)
    data = record.data
    drains = _drain(spec, rundir, data, say) if drain else None
    if metrics_textfile is not None:
        from rackcert.metrics.burnin import write_burnin_metrics

        write_burnin_metrics(metrics_textfile, record)
    if as_json:
        out = data.model_dump(mode="json", by_alias=True, exclude={"series_zlib_b64"})
        print_json({"run": str(rundir.path), **out, "slurm_drains": drains})
    else:
        for f in data.findings:
            console.print(f"FINDING {f.message}", markup=False)
        for seen in data.reported:
            share = f" ({seen.share:.0%} of samples)" if seen.share is not None else ""
            console.print(f"reported {seen.node} {seen.part}: {seen.what}{share}", markup=False)
        for u in data.unmeasured:
            console.print(f"not measured: {u}", markup=False)
        console.print(f"burnin: {data.verdict} ({len(data.findings)} finding(s));"
                      f" {rundir.path / 'burnin.json'}", markup=False)  # fmt: skip
    if data.verdict != "PASS":
        raise typer.Exit(1)


def _drain(spec: Any, rundir: Any, data: Any, say: Any) -> list[dict[str, Any]]:
    """--drain: each node a GPU, port or node finding names, with that finding as its reason
    (the bench's drain path: validation.bench.localisation.drain, which never touches an
    operator's drain and resumes only what it drained)."""
    import json
    from dataclasses import asdict

    from rackcert.core.localisation import Finding, Localisation
    from validation.bench.localisation.drain import RECORD_NAME, drain_named

    per_node = [f for f in data.findings if f.kind not in ("link", "allreduce", "nccl")]
    loc = Localisation(
        order=[n.node for n in data.nodes],
        findings=[
            Finding(kind="node", nodes=(f.node,), check=f.id, message=f.message) for f in per_node
        ],
    )
    env = {"SLURM_CONF": spec.slurm.client_conf} if spec.slurm.client_conf else {}
    actions = drain_named(loc, record=rundir.path.parent / RECORD_NAME, env=env,
                          run=rundir.path.name)  # fmt: skip
    out = [asdict(a) for a in actions]
    (rundir.artifacts("burnin") / "slurm-drains.json").write_text(json.dumps(out, indent=2))
    for a in actions:
        say(f"slurm: {a.action} {a.node}: {a.reason}")
    return out
