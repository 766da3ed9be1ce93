"""`rackcert bench` end to end: plan the launches, run them, judge, record bench.json.

Why one module: the CLI wires stages, this wires the bench's parts (launch, storage,
k8s, verdict) in one order, writing the stage record after every launch so a failure
half-way loses nothing already measured.

Weak scaling points: locally one launch per GPU count (`--gpus 1,2,4,8`, one process
per GPU through torchrun --standalone; 2 Gloo CPU processes where there is no GPU);
across nodes one launch per node count (`--nodes 1,2,4`), torchrun on every node over
SSH with one c10d rendezvous, or horovodrun. The allreduce sweep runs in the largest
launch; the naive-vs-default comparison (GPUs) in the smallest.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from rackcert.core.errors import InputError, RackcertError
from rackcert.core.paths import REPO_ROOT
from rackcert.core.runs import RunDir, utc_now
from rackcert.core.spec import Spec, Vm
from rackcert.core.stage_records import BenchData, BenchRecord, bench_parts
from rackcert.core.untrusted import cap_model, cap_strings
from validation.bench import k8s, launch, ports, slurm_launch, units, verdict
from validation.bench.node import compilecache, declare
from validation.bench.options import BACKENDS, BenchOptions, Engine, Point, Progress
from validation.bench.targets import (
    engine_gpus,
    host_keys,
    nodes_of,
    remote_python,
    select_vms,
)
from validation.bench.transport import Step
from validation.bench.units.base import BenchUnit, Context, dump


def remote_engine(spec: Spec, opts: BenchOptions, points: list[Point], log: Path) -> Engine:
    """The engine on the nodes: what --backend says; auto asks the first node whether
    Horovod imports in its environment (the controller's own packages say nothing)."""
    # The template's GPUs are what the spec asks; the worker sees what the node has.
    device = "auto"
    if opts.launcher == "srun" and opts.backend == "auto":
        return Engine("torch", "auto", "nccl")  # Slurm places the ranks: no node to ask first
    if opts.backend == "horovod" or (
        opts.backend == "auto" and node_has_horovod(spec, opts, points[-1].vms, log)
    ):
        return Engine("horovod", device, "horovod")
    if opts.backend == "gloo":
        return Engine("torch", "cpu", "gloo")
    if opts.backend == "nccl":
        return Engine("torch", "cuda", "nccl")
    return Engine("torch", "auto", "nccl")


def _horovod_imports() -> bool:
    if importlib.util.find_spec("horovod") is None:
        return False
    try:
        import horovod.torch  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken build is "not available", said in the record
        return False
    return True


def local_gpu_count() -> int:
    try:
        import torch
    except ImportError:
        raise InputError("rackcert bench needs torch (pip install 'rackcert[bench]')") from None
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def choose_engine(backend: str, have_gpus: bool) -> Engine:
    """auto: Horovod when it imports, else torch.distributed (NCCL on GPUs, Gloo on CPUs)."""
    if backend not in BACKENDS:
        raise InputError(f"--backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    device = "cuda" if have_gpus else "cpu"
    if backend == "horovod" or (backend == "auto" and _horovod_imports()):
        if not _horovod_imports():
            raise InputError("--backend horovod: horovod.torch does not import here")
        return Engine("horovod", device, "horovod")
    if backend == "nccl" and not have_gpus:
        raise InputError("--backend nccl needs GPUs; this machine has none (use gloo)")
    if backend == "gloo":
        return Engine("torch", "cpu", "gloo")
    return Engine("torch", device, "nccl" if have_gpus else "gloo")


def _doubling(top: int) -> list[int]:
    out, n = [], 1
    while n <= top:
        out.append(n)
        n *= 2
    return out if out[-1] == top else [*out, top]


def plan_points(spec: Spec, opts: BenchOptions, gpu_count: int) -> list[Point]:
    """The launches of the weak-scaling sweep, smallest first."""
    if opts.local:
        if gpu_count:
            counts = opts.gpus or _doubling(gpu_count)
            too_many = [c for c in counts if c > gpu_count]
            if too_many:
                raise InputError(f"--gpus {too_many[0]}: this machine has {gpu_count} GPU(s)")
        else:
            counts = opts.gpus or [1, 2]
        if any(c < 1 for c in counts):
            raise InputError("--gpus: counts must be >= 1")
        return [Point(1, c, c) for c in sorted(set(counts))]
    vms = select_vms(spec, opts.vms)
    template = spec.template(vms[0].template)
    per_node = opts.gpus_per_node or template.gpus or 1
    counts = opts.nodes or _doubling(len(vms))
    for c in counts:
        if c < 1 or c > len(vms):
            raise InputError(f"--nodes {c}: the spec offers {len(vms)} node(s) ({vms[0].name}...)")
    return [Point(c, c * per_node, per_node, tuple(vms[:c])) for c in sorted(set(counts))]


def compile_cache_dir(spec: Spec, opts: BenchOptions) -> str | None:
    """Where the ranks keep what torch.compile built (validation.bench.node.compilecache): the
    option, else under the nodes' DL environment, or this interpreter's locally."""
    if opts.compile_cache is not None:
        return opts.compile_cache or None
    prefix = sys.prefix if opts.local else spec.guest.dl_venv
    return compilecache.default_dir(prefix)


def worker_args(
    opts: BenchOptions, engine: Engine, tasks: list[str], cache: str | None = None
) -> list[str]:
    """The worker's arguments: the launch's tasks and device, then every declared option a
    unit passes to the worker (`Opt.worker`), declarations first (validation.bench.node.declare)."""
    args = ["--tasks", ",".join(tasks), "--device", engine.device]
    if cache:
        args += ["--compile-cache", cache]
    if opts.quick:
        args.append("--quick")
    for module in dict.fromkeys(u.task_module for u in active_units(opts) if u.task_module):
        args += ["--task-module", module]
    passed = [o for o in units.declared_options().values() if o.worker]
    return args + declare.worker_argv(opts.given(passed))


def build_launch(
    spec: Spec, opts: BenchOptions, engine: Engine, point: Point, tasks: list[str]
) -> launch.Launch:
    args = worker_args(opts, engine, tasks, compile_cache_dir(spec, opts))
    unit = "GPU" if engine.device == "cuda" else "rank"
    label = f"{point.nodes} node(s), {point.gpus} {unit}(s): {', '.join(tasks)}"
    if opts.local:
        if engine.worker_backend == "horovod":
            cmd = launch.local_horovodrun(point.procs_per_node, args)
        else:
            cmd = launch.local_torchrun(point.procs_per_node, args)
        path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)
        env = {"PYTHONPATH": path}
        if engine.device == "cpu":
            # One core per rank at every scale (torchrun sets it only for >1 process), so the
            # 1-rank baseline is not a 2-thread run and CPU "weak scaling" means something.
            env["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS", "1")
        return launch.here(label, [cmd], env=env, cwd=str(REPO_ROOT))
    nodes = nodes_of(spec, point.vms, opts)
    py = remote_python(spec, opts)
    env = {"PYTHONPATH": opts.remote_dir} if opts.remote_dir else {}
    iface = opts.network_interface or spec.network.interface
    which = launcher_of(opts, engine)
    if which == "mpirun":
        env |= ports.mpi_port_env(spec)
    if which == "srun":
        return srun_launch(spec, opts, engine, point, label, args)
    if which == "horovodrun":
        # One node: horovodrun sees only local hosts and looks for the interfaces holding
        # 127.0.0.1 among those named (Horovod 0.28.1, horovod/runner/driver/
        # driver_service.py get_local_interfaces), so naming the data interface fails
        # ("No interface is found for address 127.0.0.1"); its ranks meet over loopback.
        step = launch.ssh_horovodrun(
            nodes,
            point.procs_per_node,
            args,
            remote_python=py,
            interface=iface if point.nodes > 1 else None,
            env=env,
            host_keys=host_keys(opts, nodes),
        )
        return launch.on_nodes(label, [step])
    if which == "mpirun":
        step = launch.ssh_mpirun(
            nodes,
            point.procs_per_node,
            args,
            remote_python=py,
            backend=engine.worker_backend,
            interface=iface,
            known_hosts=opts.node_known_hosts,
            rdzv_port=ports.rendezvous_port(spec, opts.rdzv_port),
            env=env,
            host_keys=host_keys(opts, nodes),
        )
        return launch.on_nodes(label, [step])
    step = launch.ssh_torchrun(
        nodes,
        point.procs_per_node,
        args,
        remote_python=py,
        remote_dir=opts.remote_dir,
        rdzv_port=ports.rendezvous_port(spec, opts.rdzv_port),
    )
    return launch.on_nodes(label, [step])


def require_spec_fits(spec: Spec, opts: BenchOptions) -> None:
    """The choices that need the spec to say more, and parts --skip does not know, refused
    before anything is reached."""
    units.check_skip(opts.skip)
    if opts.launcher == "srun" and spec.slurm is None:
        raise InputError("--launcher srun: the spec has no slurm block (controller, partition)")


def srun_launch(
    spec: Spec, opts: BenchOptions, engine: Engine, point: Point, label: str, args: list[str]
) -> launch.Launch:
    """One srun for the point: Slurm places its ranks (validation.bench.slurm_launch)."""
    require_spec_fits(spec, opts)
    assert spec.slurm is not None  # require_spec_fits refused a spec without one
    env = {"PYTHONPATH": opts.remote_dir} if opts.remote_dir else {}
    env |= ports.mpi_port_env(spec)
    return slurm_launch.build(
        label,
        nodes=point.nodes,
        tasks_per_node=point.procs_per_node,
        gpus=engine.device == "cuda" or (engine.device == "auto" and engine_gpus(spec, point.vms)),
        python=remote_python(spec, opts),
        worker_args=args,
        partition=spec.slurm.partition,
        reservation=opts.reservation,
        immediate_s=spec.slurm.job_timeout_s,
        client_conf=spec.slurm.client_conf,
        rdzv_port=ports.rendezvous_port(spec, opts.rdzv_port),
        env=env,
        backend=engine.worker_backend,
        interface=opts.network_interface or spec.network.interface,
    )


def slurm_placement(data: dict[str, Any], log: Path) -> dict[str, Any]:
    """For an srun launch: its job ids and the nodes Slurm chose, also gathered in the
    launch record (`launch.jobs`); nothing for the other launchers."""
    if data["launch"].get("launcher") != "srun":
        return {}
    placed = slurm_launch.placement(log.read_text(errors="replace"))
    data["launch"].setdefault("jobs", []).append(placed)
    return {"slurm": placed}


def launcher_of(opts: BenchOptions, engine: Engine) -> str:
    """horovodrun for Horovod and torchrun for torch.distributed unless told (mpirun)."""
    if opts.launcher != "auto":
        if opts.launcher == "horovodrun" and engine.worker_backend != "horovod":
            raise InputError("--launcher horovodrun starts Horovod ranks: use --backend horovod")
        if opts.launcher == "torchrun" and engine.worker_backend == "horovod":
            raise InputError("--launcher torchrun starts torch.distributed ranks, not Horovod")
        return opts.launcher
    return "horovodrun" if engine.worker_backend == "horovod" else "torchrun"


def launch_record(opts: BenchOptions, engine: Engine, vms: tuple[Vm, ...]) -> dict[str, Any]:
    """What bench.json says about how the ranks were started: engine, launcher, controller
    (rendezvous) and where the launcher ran."""
    which = "torchrun" if opts.local and engine.worker_backend != "horovod" else None
    if opts.local and engine.worker_backend == "horovod":
        which = "horovodrun"
    which = which or launcher_of(opts, engine)
    controller = {"torchrun": "c10d", "horovodrun": "gloo", "mpirun": "mpi", "srun": "slurm"}[which]
    if opts.local:
        where = "this machine"
    elif which == "srun":
        where = "this machine, one srun per launch; Slurm chose the nodes"
    elif which == "torchrun":
        where = "this machine, one ssh per node"
    else:
        where = vms[0].name
    return {
        "engine": "horovod" if engine.worker_backend == "horovod" else "torch.distributed",
        "collectives": engine.name,
        "launcher": which,
        "controller": controller,
        "launched_from": where,
    }


def node_has_horovod(spec: Spec, opts: BenchOptions, vms: tuple[Vm, ...], log: Path) -> bool:
    """Whether horovod.torch imports in the first node's environment (auto backend)."""
    node = nodes_of(spec, vms[:1], opts)[0]
    py = remote_python(spec, opts)
    step = Step.on_all([node], f"{py} -c 'import horovod.torch'", "rackcert-probe")
    probe = launch.on_nodes("horovod probe", [step], tty=False)
    try:
        launch.execute_text(probe, log, timeout_s=120)
    except launch.LaunchError:
        return False
    return True


def active_units(opts: BenchOptions) -> list[BenchUnit]:
    """The units this run measures: UNITS less what --skip leaves out."""
    return [u for u in units.UNITS if u.word not in opts.skip]


def _tasks(opts: BenchOptions, engine: Engine, point: Point, points: list[Point]) -> list[str]:
    """The worker tasks of the point's launches, one launch each, in UNITS' order."""
    return list(task_owners(opts, engine, point, points))


def task_owners(
    opts: BenchOptions, engine: Engine, point: Point, points: list[Point]
) -> dict[str, BenchUnit]:
    """The point's worker tasks, each with the unit that asked for it, in UNITS' order."""
    return {t: u for u in active_units(opts) for t in u.tasks(opts, engine, point, points)}


def launch_groups(opts: BenchOptions, engine: Engine, tasks: list[str]) -> list[list[str]]:
    """The tasks of one point, grouped into launches (processes).

    One process per configuration: nothing one loop leaves behind (compiled graphs and their
    Python objects, CUDA-graph pools, allocator state, cudnn and NCCL state) can slow the
    next, so each figure is what that configuration does alone in a fresh process
    (docs/bench-h200.md measures both). Except a quick bench of CPU nodes (the lab's path
    check, `rackcert demo`): eager fp32 leaves none of that state, and the worker runs the
    allreduce sweep before ResNet50, so one launch does both; a launch across nodes costs
    tens of seconds of start on a busy 2-core machine (ssh, horovodrun's checks, torch
    imported by every rank), a quarter of the demo's bench.
    """
    if opts.quick and not opts.local and engine.device == "cpu":
        return [tasks] if tasks else []
    return [[task] for task in tasks]


def _record_unit(
    unit: BenchUnit,
    ctx: Context,
    data: dict[str, Any],
    typed: dict[str, Any],
    progress: Progress,
) -> None:
    """Run a unit into the record: typed[name], its result as it returned it (or
    data["units"][name], JSON, for a unit the record's model does not name yet), the other
    keys it fills, its progress lines."""
    result = unit.run(ctx)
    if result is None:
        return
    if unit.name in BenchData.model_fields or unit.name in bench_parts():
        typed[unit.name] = result
    else:
        data.setdefault("units", {})[unit.name] = dump(result)
    data.update(unit.also(ctx, result))
    for line in unit.say(ctx, result):
        progress(line)


# -- storage ----------------------------------------------------------------------------------


# -- engines of the vendors: nccl-tests, perftest -------------------------------------------


# -- assembly ---------------------------------------------------------------------------------


def timeline(wall_s: float | None, phases: dict[str, float | None]) -> str:
    """Where a launch's wall time went, one line: rank 0's age when the worker began (the
    launcher's start and the interpreter's), then each phase the worker timed."""
    parts = [f"{name.removesuffix('_s')} {v:.1f}" for name, v in phases.items() if v is not None]
    wall = f"launch {wall_s:.1f} s" if wall_s is not None else "launch"
    return f"{wall}: " + ", ".join(parts) + " s (rank 0)"


def launch_entry(
    job: launch.Launch,
    tasks: list[str],
    log: Path,
    raw: dict[str, Any],
    kept: tuple[str, ...] | list[str] = (),
) -> dict[str, Any]:
    """bench.json's record of one launch (one process per rank, one configuration), with
    the raw answers of the tasks in `kept` (those whose unit keeps them: keeps_answer)."""
    return {
        "label": job.label,
        "tasks": tasks,
        "log": str(log),
        "commands": job.commands,
        "wall_s": raw.get("wall_s"),
        "ranks": raw.get("ranks"),
        "compile_cache": raw.get("compile_cache"),
        "exit_warning": raw.get("exit_warning"),
        "phases": raw.get("phases"),
        **{task: raw[task] for task in kept if task in raw},
    }


def write_record(
    run: RunDir,
    data: dict[str, Any] | BenchData,
    status: str,
    error: str | None,
    started: str,
    typed: dict[str, Any] | None = None,
) -> BenchRecord:
    """bench.json as it stands: `data` the raw parts (the launches' answers, as they came)
    with `typed` (the units' results and the verdict, BenchData's fields, as they are), or
    a BenchData already whole. A node's long output (a crashed rank's stderr, a GPU name)
    is cut in the record; the launch logs under the run's bench artifacts keep the whole."""
    where = str(run.artifacts("bench").relative_to(run.path))
    if isinstance(data, BenchData):
        whole: dict[str, Any] | BenchData = data
    else:
        capped = cap_strings(data, where=where)
        # The commands are rackcert's own (a remote shell line runs past the cut): kept whole.
        launches = zip(capped.get("launches", []), data.get("launches", []), strict=True)
        for kept, launched in launches:
            if "commands" in launched:
                kept["commands"] = launched["commands"]
        parts = {k: cap_model(v, where) for k, v in (typed or {}).items()}
        whole = {**capped, **parts}  # a model among them is taken as it is, not re-read
    written = run.write_stage("bench", whole, status=status, error=error, started_at=started)
    assert isinstance(written, BenchRecord)
    return written


def run_bench(
    spec: Spec, run: RunDir, opts: BenchOptions, progress: Progress = lambda _m: None
) -> BenchRecord:
    """Run the whole bench into `run`; returns bench.json as written. Raises on a failed
    launch, after recording what was measured before it (status failed)."""
    started = utc_now()
    units.check_skip(opts.skip)
    gpu_count = local_gpu_count() if opts.local else (opts.gpus_per_node or 1)
    points = plan_points(spec, opts, gpu_count)
    if opts.local:
        engine = choose_engine(opts.backend, gpu_count > 0)
    else:
        engine = remote_engine(spec, opts, points, run.artifacts("bench") / "probe.log")
    line_rate = spec.line_rate_gbps()  # the NIC's, for launches across nodes
    art = run.artifacts("bench")
    data: dict[str, Any] = {
        "mode": "local" if opts.local else ("slurm" if opts.launcher == "srun" else "ssh"),
        "engine": {
            "name": engine.name,
            "worker_backend": engine.worker_backend,
            "device": engine.device,
            "horovod_available": _horovod_imports() if opts.local else engine.name == "horovod",
        },
        "launch": launch_record(opts, engine, points[-1].vms),
        "quick": opts.quick,
        # set from the allreduce launch: whether its link has a figure to judge against
        "judge_link": False,
        "thresholds": spec.certification.model_dump(),
        "launches": [],
    }

    typed: dict[str, Any] = {}  # the units' results and the verdict, as they are
    written: list[BenchRecord] = []  # the last record written

    def record(status: str = "partial", error: str | None = None) -> BenchRecord:
        written[:] = [write_record(run, data, status, error, started, typed)]
        return written[0]

    k8s_counts = sorted({p.nodes for p in points}) if not opts.local else _k8s_counts(spec)
    per_node = points[0].procs_per_node if not opts.local else _k8s_gpus(spec)
    pods = Engine("torch", "auto", "nccl")
    # the pods run what the units ask of the largest launch, in one launch each
    k8s_args = worker_args(opts, pods, _tasks(opts, pods, points[-1], points))
    # the pods pick their device: the pair "--device auto" out (a value "auto" stays)
    k8s_args = k8s_args[:2] + k8s_args[4:] if k8s_args[2:4] == ["--device", "auto"] else k8s_args
    data["kubernetes"] = k8s.write_manifests(
        art / "k8s",
        rack=spec.metadata.name,
        node_counts=k8s_counts,
        gpus_per_node=per_node,
        image=opts.image,
        worker_args=k8s_args,
    )
    ctx = Context(spec, opts, run, engine, points, line_rate, progress)
    during = [u for u in active_units(opts) if not u.after_launches]
    try:
        for point in points:
            owners = task_owners(opts, engine, point, points)
            tasks = list(owners)
            if not tasks:
                continue
            raw: dict[str, Any] = {}
            for group in launch_groups(opts, engine, tasks):
                job = build_launch(spec, opts, engine, point, group)
                if engine.device != "cpu":
                    for task in group:
                        job.env.update(owners[task].gpu_launch_env)
                progress(f"launch: {job.label}")
                log = art / f"launch-{point.nodes}n-{point.gpus}g-{'-'.join(group)}.log"
                one = launch.first_result(launch.execute(job, log, timeout_s=opts.timeout_s))
                placed = slurm_placement(data, log)
                kept = [t for t in group if owners[t].keeps_answer]
                data["launches"].append({**launch_entry(job, group, log, one, kept), **placed})
                if one.get("exit_warning"):
                    data.setdefault("warnings", []).append(f"{job.label}: {one['exit_warning']}")
                    progress(f"  warning: {one['exit_warning']}")
                raw = {**raw, **one}
                data["environment"] = one.get("environment", {})
                if engine.device == "auto":  # nodes chose: the worker says what it ran on
                    engine = Engine(engine.worker_backend, one["device"], one["backend"])
                    data["launch"]["collectives"] = engine.name
                    ctx.engine = engine
                for task in group:
                    line = owners[task].launch_line(task, one[task]) if task in one else None
                    if line:
                        progress(f"  {task}: {line}")
                if one.get("phases"):
                    progress(f"  {timeline(one.get('wall_s'), one['phases'])}")
                record()
            ctx.answers.append((point, raw))
            for unit in during:
                _record_unit(unit, ctx, data, typed, progress)
            record()
        for unit in active_units(opts):
            if unit.after_launches:
                _record_unit(unit, ctx, data, typed, progress)
                record()
    except RackcertError as exc:
        record("failed", str(exc))  # no verdict: what was measured, and why it stopped
        raise
    # the units' checks read bench.json's shape: judged over the record as written
    typed["verdict"] = verdict.judge_bench(spec, (written or [record()])[-1].data)
    return record("ok")


def _k8s_counts(spec: Spec) -> list[int]:
    try:
        return _doubling(len(select_vms(spec, None)))
    except InputError:
        return [1]


def _k8s_gpus(spec: Spec) -> int:
    if not spec.vms:
        return 1
    return spec.template(spec.vms[0].template).gpus or 1
