"""`rackcert bench`: allreduce sweep, ResNet50 weak scaling and storage reads, judged.

Wires the spec and the run directory to validation.bench (imported lazily: torch is heavy
and `rackcert --help` must stay fast).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from rackcert.cli.common import (
    JsonOpt,
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
from rackcert.cli.output import show_table
from rackcert.errors import InputError

_SKIPPABLE = ("allreduce", "resnet", "storage", "rdma")


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


@app.command("bench")
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
    naive: Annotated[
        bool | None,
        typer.Option(
            "--naive/--no-naive", help="Also time a naive eager fp32 NCHW loop (default: on GPUs)"
        ),
    ] = None,
    references: Annotated[
        bool | None,
        typer.Option(
            "--references/--no-references",
            help="Also time two reference loops: a plain compiled fp16 loop and Horovod's"
            " synthetic-benchmark defaults (default: on GPUs)",
        ),
    ] = None,
    compile_mode: Annotated[
        str | None,
        typer.Option(
            "--compile-mode",
            help="torch.compile mode: auto (CUDA graphs at one rank), default,"
            " reduce-overhead, max-autotune, max-autotune-no-cudagraphs",
        ),
    ] = None,
    compile_optimizer: Annotated[
        bool | None,
        typer.Option(
            "--compile-optimizer/--no-compile-optimizer",
            help="Compile the optimizer step too (bf16/fp32: no gradient scaler)",
        ),
    ] = None,
    compile_: Annotated[
        bool | None,
        typer.Option("--compile/--no-compile", help="torch.compile the model (default: on GPUs)"),
    ] = None,
    batch: Annotated[
        int | None, typer.Option("--batch", min=1, help="Images per GPU per step")
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="torchvision model (resnet50)")
    ] = None,
    image_size: Annotated[
        int | None, typer.Option("--image-size", min=16, help="Synthetic image side (224)")
    ] = None,
    precision: Annotated[str | None, typer.Option("--precision", help="fp16, bf16 or fp32")] = None,
    max_bytes: Annotated[
        int | None, typer.Option("--max-bytes", min=8, help="Largest allreduce")
    ] = None,
    skip: Annotated[
        str | None,
        typer.Option("--skip", help="Comma list of allreduce,resnet,storage,rdma to leave out"),
    ] = None,
    storage_dir: Annotated[
        Path | None, typer.Option("--storage-dir", help="Read this directory instead of the mount")
    ] = None,
    synthetic_data: Annotated[
        bool | None,
        typer.Option(
            "--synthetic-data/--no-synthetic-data",
            help="Create small files if the data directory is empty (default: the spec's"
            " storage.nfs.create_synthetic_data)",
        ),
    ] = None,
    line_rate_gbps: Annotated[
        float | None, typer.Option("--line-rate-gbps", help="Link line rate to judge busbw against")
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
        int, typer.Option("--rdzv-port", help="c10d rendezvous port on node 1")
    ] = 29400,
    image: Annotated[
        str, typer.Option("--image", help="Container image for the Kubernetes manifests")
    ] = "rackcert-bench:latest",
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per launch")] = 1800.0,
    launcher: Annotated[
        str,
        typer.Option(
            "--launcher",
            help="Across nodes: auto (horovodrun for Horovod, torchrun otherwise), torchrun,"
            " horovodrun or mpirun (started on the first node)",
        ),
    ] = "auto",
    network_interface: Annotated[
        str | None,
        typer.Option(
            "--network-interface",
            help="The nodes' data interface for horovodrun/mpirun (default: network.interface)",
        ),
    ] = None,
    nccl_tests: Annotated[
        str | None,
        typer.Option(
            "--nccl-tests",
            help="all_reduce_perf to run beside the sweep (default: the one on PATH, if any)",
        ),
    ] = None,
    storage_engine: Annotated[
        str,
        typer.Option("--storage-engine", help="auto (fio when installed), fio or pread"),
    ] = "auto",
    junit: Annotated[
        Path | None,
        typer.Option("--junit", help="Also write the verdict's checks as JUnit XML here (for CI)"),
    ] = None,
    runs_dir: RunsRootOpt = None,  # type: ignore[assignment]
    run: RunOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Benchmark the rack and judge it against spec.certification; writes bench.json.

    Allreduce sweep (8 B .. 1 GiB; algbw, busbw as nccl-tests), ResNet50 synthetic
    weak scaling (images/s per GPU and total, speedup, efficiency), storage random reads,
    Kubeflow PyTorchJob/MPIJob manifests. Exit 0 only on PASS: 1 when the verdict is FAIL
    or INCOMPLETE (a check certification.required names, or every check, was not judged).
    """
    import validation.bench
    from validation.bench.suite import BenchOptions

    skipped = set(_names(skip) or [])
    unknown = skipped - set(_SKIPPABLE)
    if unknown:
        raise InputError(f"--skip {sorted(unknown)[0]!r}: choose from {', '.join(_SKIPPABLE)}")
    if gpus and not local:
        raise InputError("--gpus sweeps GPU counts on this machine: use it with --local")
    if precision and precision not in ("fp16", "bf16", "fp32"):
        raise InputError(f"--precision {precision!r}: choose fp16, bf16 or fp32")
    modes = ("auto", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
    if compile_mode and compile_mode not in modes:
        raise InputError(f"--compile-mode {compile_mode!r}: choose one of {', '.join(modes)}")
    if launcher not in ("auto", "torchrun", "horovodrun", "mpirun"):
        raise InputError(f"--launcher {launcher!r}: choose auto, torchrun, horovodrun or mpirun")
    if storage_engine not in ("auto", "fio", "pread"):
        raise InputError(f"--storage-engine {storage_engine!r}: choose auto, fio or pread")
    loaded = load(spec_path)
    if not local:
        from rackcert.lab.routes import require_lab_up

        require_lab_up(loaded.spec)  # the lab's addresses, with the lab down, lead off the machine
    opts = BenchOptions(
        local=local,
        gpus=_ints(gpus, "--gpus"),
        nodes=_ints(nodes, "--nodes"),
        vms=_names(vms),
        gpus_per_node=gpus_per_node,
        backend=backend,
        quick=quick,
        naive=naive,
        references=references,
        compile=compile_,
        compile_mode=compile_mode,
        compile_optimizer=compile_optimizer,
        batch=batch,
        model=model,
        image_size=image_size,
        precision=precision,
        max_bytes=max_bytes,
        skip=skipped,
        storage_dir=storage_dir,
        synthetic_data=synthetic_data,
        line_rate_gbps=line_rate_gbps,
        known_hosts=known_hosts,
        remote_python=remote_python,
        remote_dir=remote_dir,
        rdzv_port=rdzv_port,
        image=image,
        timeout_s=timeout,
        nccl_tests=nccl_tests,
        storage_engine=storage_engine,
        launcher=launcher,
        network_interface=network_interface,
    )
    rundir = open_or_create_run(loaded, runs_dir or default_runs_root(), run)
    say = (lambda _m: None) if as_json else (lambda m: console.print(m, highlight=False))
    record = validation.bench.run(loaded, rundir, opts, progress=say)
    data = record.data.model_dump(mode="json")
    if junit is not None and record.data.verdict is not None:
        from validation.junit import write_bench_junit

        write_bench_junit(junit, record.data.verdict)
    if as_json:
        print_json({"run": str(rundir.path), **data})
    else:
        _show(data, rundir.path)
    if not data["verdict"]["passed"]:
        raise typer.Exit(1)


def _show(data: dict[str, Any], path: Path) -> None:
    sc = data.get("resnet50")
    if sc:
        t = Table(
            title=f"ResNet50 {sc['precision']} batch {sc['batch_per_gpu']}/GPU, {sc['backend']}"
        )
        for col in ("nodes", "GPUs", "images/s", "+-", "per GPU", "speedup", "efficiency"):
            t.add_column(col, justify="right")
        for p in sc["points"]:
            t.add_row(
                str(p["nodes"]),
                str(p["gpus"]),
                f"{p['images_per_sec']:.1f}",
                f"{p['spread']:.1f}",
                f"{p['images_per_sec_per_gpu']:.1f}",
                f"{p['speedup']:.2f}",
                f"{p['efficiency']:.3f}",
            )
        show_table(console, t)
    ar = data.get("allreduce")
    if ar:
        top = sorted(ar["points"], key=lambda p: p["size_bytes"])[-3:]
        rows = ", ".join(f"{p['size_bytes']} B: {p['busbw_gbps']:.3g} GB/s" for p in top)
        console.print(f"allreduce {ar['backend']} x{ar['world_size']}: busbw {rows}")
    nt = data.get("nccl_tests") or {}
    if nt and not nt.get("skipped"):
        console.print(
            f"nccl-tests {nt.get('version')} x{nt['world_size']}: avg busbw"
            f" {nt['avg_busbw_gbps']} GB/s (the sweep's figures beside it in bench.json)"
        )
    elif nt:
        console.print(f"nccl-tests: not run ({nt['reason']})")
    rdma = data.get("rdma") or {}
    if rdma.get("skipped"):
        console.print(f"rdma: not run ({rdma['reason']})")
    for pair in rdma.get("pairs", []):
        best = pair.get("best_avg_gbps")
        console.print(f"rdma {pair['client']} -> {pair['server']}: {best or pair.get('error')}")
    nd = data.get("naive_vs_default")
    if nd:
        console.print(
            f"naive {nd['naive']['images_per_sec']:.1f} vs default"
            f" {nd['default']['images_per_sec']:.1f} images/s: x{nd['ratio']:.2f}"
        )
    refs = data.get("references") or {}
    for name in ("plain", "horovod_defaults"):
        if name in refs:
            console.print(
                f"{name} reference {refs[name]['images_per_sec']:.1f} images/s: default"
                f" x{refs[f'default_vs_{name}']:.2f}"
            )
    st = data.get("storage") or {}
    if st and not st.get("skipped"):
        console.print(
            f"storage: {st['throughput_mb_s']:.1f} MB/s random reads ({st.get('note', '')})"
        )
    v = data["verdict"]
    for c in v["checks"]:
        status = "not judged" if c["status"] == "skip" else c["status"]
        need = " (required)" if c.get("required") else ""
        line = f"  {status:>10}  {c['id']}{need}: {c['observed']} {c['reason']}"
        console.print(line.rstrip(), soft_wrap=True)
    colour = {"PASS": "green", "FAIL": "red"}.get(v["verdict"], "yellow")
    console.print(f"verdict: [{colour}]{v['verdict']}[/]; bench.json in {path}", soft_wrap=True)
    if v["verdict"] == "INCOMPLETE":
        console.print("  not judged: " + "; ".join(v["not_judged"]), soft_wrap=True)
