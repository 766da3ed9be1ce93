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
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rackcert.core.errors import InputError, RackcertError
from rackcert.core.known_hosts import peer_lines
from rackcert.core.paths import REPO_ROOT
from rackcert.core.results import AllreducePoint, AllreduceResult, ScalingPoint, ScalingResult
from rackcert.core.runs import RunDir, utc_now
from rackcert.core.spec import Certification, Spec, Vm
from rackcert.core.ssh_target import SshTarget
from rackcert.core.stage_records import BenchRecord
from rackcert.core.untrusted import cap_strings
from validation.bench import (
    compilecache,
    k8s,
    launch,
    links,
    nccltests,
    perftest,
    slurm_launch,
    storage,
    verdict,
)
from validation.bench.allreduce import busbw_fraction
from validation.bench.resnet import scaling

BACKENDS = ("auto", "nccl", "gloo", "horovod")
LAUNCHERS = ("auto", "torchrun", "horovodrun", "mpirun", "srun")
WORLD1_NOTE = (
    "world size 1: the sweep proves the engine path and the reduced values; an in-place"
    " single-rank allreduce moves no data (NCCL returns after a launch), so times are"
    " latency, algbw is not a bandwidth and busbw is 0 by definition"
)


@dataclass
class BenchOptions:
    """Everything `rackcert bench` can be told; defaults are the certification run."""

    local: bool = False
    gpus: list[int] | None = None
    nodes: list[int] | None = None
    vms: list[str] | None = None
    gpus_per_node: int | None = None
    backend: str = "auto"
    quick: bool = False
    naive: bool | None = None
    references: bool | None = None
    compile: bool | None = None
    compile_mode: str | None = None
    compile_optimizer: bool | None = None
    batch: int | None = None
    model: str | None = None
    image_size: int | None = None
    precision: str | None = None
    max_bytes: int | None = None
    skip: set[str] = field(default_factory=set)
    storage_dir: Path | None = None
    synthetic_data: bool | None = None
    line_rate_gbps: float | None = None
    known_hosts: Path | None = None
    # known_hosts ON the nodes for mpirun's hops: the one configure's ssh_trust role fills
    node_known_hosts: str | None = "~/.ssh/known_hosts"
    remote_python: str | None = None  # default: the spec's guest.dl_venv/bin/python
    remote_dir: str | None = None  # a rackcert checkout on the nodes (default: none, the
    # worker is installed in the nodes' environment by configure's dl_runtime role)
    launcher: str = "auto"  # auto | torchrun | horovodrun | mpirun | srun
    reservation: str | None = None  # srun: run inside this Slurm reservation
    network_interface: str | None = None  # default: the spec's network.interface
    rdzv_port: int = 29400
    image: str = "rackcert-bench:latest"
    timeout_s: float = 1800.0
    nccl_tests: str | None = None  # all_reduce_perf to run (default: PATH, then the role's)
    storage_engine: str = "auto"  # fio when installed, else pread
    # inductor/Triton cache on the nodes, kept between runs: default under the DL environment
    # (guest.dl_venv remotely, this interpreter's prefix locally); "" turns it off
    compile_cache: str | None = None

    def __post_init__(self) -> None:
        """Every choice is checked here, once, whoever builds the options (CLI or library)."""
        for name, flag, allowed in _CHOICES:
            value = getattr(self, name)
            if value is not None and value not in allowed:
                raise InputError(f"{flag} {value!r}: choose one of {', '.join(allowed)}")
        unknown = set(self.skip) - set(SKIPPABLE)
        if unknown:
            raise InputError(f"--skip {sorted(unknown)[0]!r}: choose from {', '.join(SKIPPABLE)}")
        if self.gpus and not self.local:
            raise InputError("--gpus sweeps GPU counts on this machine: use it with --local")
        if self.reservation and self.launcher != "srun":
            raise InputError("--reservation is a Slurm reservation: use it with --launcher srun")


SKIPPABLE = ("allreduce", "resnet", "storage", "rdma")
# (field, the CLI flag that sets it, its choices): one table, read by __post_init__.
_CHOICES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("precision", "--precision", ("fp16", "bf16", "fp32")),
    (
        "compile_mode",
        "--compile-mode",
        ("auto", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"),
    ),
    ("launcher", "--launcher", LAUNCHERS),
    ("storage_engine", "--storage-engine", ("auto", "fio", "pread")),
    ("backend", "--backend", BACKENDS),
)


@dataclass(frozen=True)
class Point:
    """One weak-scaling measurement to launch."""

    nodes: int
    gpus: int
    procs_per_node: int
    vms: tuple[Vm, ...] = ()


@dataclass(frozen=True)
class Engine:
    worker_backend: str  # torch | horovod
    device: str  # cuda | cpu
    name: str  # nccl | gloo | horovod


Progress = Callable[[str], None]


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


def select_vms(spec: Spec, names: list[str] | None) -> list[Vm]:
    """The bench nodes: the named VMs, or the first VM's template's VMs, one per ESXi host.

    Multi-node scaling means across hosts (the seed's Scenario 2: one 1-GPU VM on each of
    four hosts); two VMs sharing a host would share its PCIe and NIC. Hosts come from
    rackcert.core.placement, the same answer the provision planner uses.
    """
    if not spec.vms:
        raise InputError("the spec has no vms: nothing to bench across nodes (try --local)")
    if names:
        known = {v.name: v for v in spec.vms}
        missing = [n for n in names if n not in known]
        if missing:
            raise InputError(f"--vms {missing[0]}: no such VM in the spec")
        return [known[n] for n in names]
    from rackcert.core.placement import place

    host_of = {p.vm: p.host for p in place(spec)}
    first = spec.vms[0].template
    chosen: list[Vm] = []
    seen: set[str] = set()
    for vm in spec.vms:
        if vm.template == first and host_of[vm.name] not in seen:
            seen.add(host_of[vm.name])
            chosen.append(vm)
    return chosen


def nodes_of(spec: Spec, vms: tuple[Vm, ...], opts: BenchOptions) -> list[launch.Node]:
    ssh = spec.guest.ssh
    pins = str(opts.known_hosts) if opts.known_hosts else None
    return [
        launch.Node(
            v.name,
            SshTarget(
                host=v.address,
                port=v.ssh_port,
                user=ssh.user,
                identity_file=ssh.key_file,
                known_hosts=pins,
                connect_timeout=15,
            ),
        )
        for v in vms
    ]


def host_keys(opts: BenchOptions, nodes: list[launch.Node]) -> list[str] | None:
    """The nodes' enrolled keys from the controller's known_hosts, for the launchers' hops
    from the first node (None without a file: the nodes' own known_hosts, strictly)."""
    if not opts.known_hosts or not Path(opts.known_hosts).is_file():
        return None
    return peer_lines(Path(opts.known_hosts), [(n.name, n.address, n.port) for n in nodes])


def compile_cache_dir(spec: Spec, opts: BenchOptions) -> str | None:
    """Where the ranks keep what torch.compile built (validation.bench.compilecache): the
    option, else under the nodes' DL environment, or this interpreter's locally."""
    if opts.compile_cache is not None:
        return opts.compile_cache or None
    prefix = sys.prefix if opts.local else spec.guest.dl_venv
    return compilecache.default_dir(prefix)


def worker_args(
    opts: BenchOptions, engine: Engine, tasks: list[str], cache: str | None = None
) -> list[str]:
    args = ["--tasks", ",".join(tasks), "--device", engine.device]
    if cache:
        args += ["--compile-cache", cache]
    if opts.quick:
        args.append("--quick")
    for flag, value in (
        ("--batch", opts.batch),
        ("--model", opts.model),
        ("--image-size", opts.image_size),
        ("--precision", opts.precision),
        ("--max-bytes", opts.max_bytes),
    ):
        if value is not None:
            args += [flag, str(value)]
    if opts.compile is not None:
        args.append("--compile" if opts.compile else "--no-compile")
    if opts.compile_mode is not None:
        args += ["--compile-mode", opts.compile_mode]
    if opts.compile_optimizer is not None:
        args.append("--compile-optimizer" if opts.compile_optimizer else "--no-compile-optimizer")
    return args


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
        return launch.Launch(label, [cmd], env=env, cwd=str(REPO_ROOT))
    nodes = nodes_of(spec, point.vms, opts)
    py = remote_python(spec, opts)
    env = {"PYTHONPATH": opts.remote_dir} if opts.remote_dir else {}
    iface = opts.network_interface or spec.network.interface
    which = launcher_of(opts, engine)
    if which == "srun":
        return srun_launch(spec, opts, engine, point, label, args)
    if which == "horovodrun":
        # One node: horovodrun sees only local hosts and looks for the interfaces holding
        # 127.0.0.1 among those named (Horovod 0.28.1, horovod/runner/driver/
        # driver_service.py get_local_interfaces), so naming the data interface fails
        # ("No interface is found for address 127.0.0.1"); its ranks meet over loopback.
        cmd = launch.ssh_horovodrun(
            nodes,
            point.procs_per_node,
            args,
            remote_python=py,
            interface=iface if point.nodes > 1 else None,
            env=env,
            host_keys=host_keys(opts, nodes),
        )
        return launch.Launch(label, [cmd])
    if which == "mpirun":
        cmd = launch.ssh_mpirun(
            nodes,
            point.procs_per_node,
            args,
            remote_python=py,
            backend=engine.worker_backend,
            interface=iface,
            known_hosts=opts.node_known_hosts,
            rdzv_port=opts.rdzv_port,
            env=env,
            host_keys=host_keys(opts, nodes),
        )
        return launch.Launch(label, [cmd])
    cmds = launch.ssh_torchrun(
        nodes,
        point.procs_per_node,
        args,
        remote_python=py,
        remote_dir=opts.remote_dir,
        rdzv_port=opts.rdzv_port,
    )
    return launch.Launch(label, cmds)


def require_spec_fits(spec: Spec, opts: BenchOptions) -> None:
    """The choices that need the spec to say more, refused before anything is reached."""
    if opts.launcher == "srun" and spec.slurm is None:
        raise InputError("--launcher srun: the spec has no slurm block (controller, partition)")


def srun_launch(
    spec: Spec, opts: BenchOptions, engine: Engine, point: Point, label: str, args: list[str]
) -> launch.Launch:
    """One srun for the point: Slurm places its ranks (validation.bench.slurm_launch)."""
    require_spec_fits(spec, opts)
    assert spec.slurm is not None  # require_spec_fits refused a spec without one
    env = {"PYTHONPATH": opts.remote_dir} if opts.remote_dir else {}
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
        rdzv_port=opts.rdzv_port,
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


def remote_python(spec: Spec, opts: BenchOptions) -> str:
    """The nodes' interpreter: --remote-python, else the DL environment configure built."""
    return opts.remote_python or f"{spec.guest.dl_venv.rstrip('/')}/bin/python"


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


def _node_gpus(spec: Spec, vms: tuple[Vm, ...]) -> int:
    return (spec.template(vms[0].template).gpus or 0) if vms else 0


def node_has_horovod(spec: Spec, opts: BenchOptions, vms: tuple[Vm, ...], log: Path) -> bool:
    """Whether horovod.torch imports in the first node's environment (auto backend)."""
    node = nodes_of(spec, vms[:1], opts)[0]
    py = remote_python(spec, opts)
    probe = launch.Launch("horovod probe", [[*node.ssh_argv(), f"{py} -c 'import horovod.torch'"]])
    try:
        launch.execute_text(probe, log, timeout_s=120)
    except launch.LaunchError:
        return False
    return True


def _tasks(opts: BenchOptions, engine: Engine, point: Point, points: list[Point]) -> list[str]:
    tasks = []
    if "allreduce" not in opts.skip and point == points[-1]:
        tasks.append("allreduce")
    if "resnet" not in opts.skip:
        tasks.append("resnet")
        naive = opts.naive if opts.naive is not None else engine.device == "cuda"
        if naive and point == points[0]:
            tasks.append("naive")
        refs = opts.references if opts.references is not None else engine.device == "cuda"
        if refs and point == points[0]:
            tasks += ["plain", "horovod_ref"]
    return tasks


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


# -- storage ----------------------------------------------------------------------------------
def storage_target(spec: Spec, opts: BenchOptions) -> tuple[Path | None, bool, str]:
    """(directory, synthetic allowed, note); directory None when there is nothing to read."""
    nfs = spec.storage.nfs
    allow = (
        opts.synthetic_data
        if opts.synthetic_data is not None
        else bool(nfs and nfs.create_synthetic_data)
    )
    if opts.storage_dir:
        return opts.storage_dir, allow, "directory given with --storage-dir"
    if nfs is None:
        return None, allow, "the spec has no storage.nfs and no --storage-dir was given"
    return Path(nfs.mount_point), allow, f"the spec's mount point ({nfs.server}:{nfs.export})"


def run_storage(spec: Spec, opts: BenchOptions, run: RunDir, points: list[Point]) -> dict[str, Any]:
    root, allow, note = storage_target(spec, opts)
    cfg = storage.StorageConfig.quick() if opts.quick else storage.StorageConfig()
    if root is None:
        return {"skipped": True, "reason": note}
    if opts.local:
        scratch = None
        if not root.is_dir():
            if not allow:
                return {"skipped": True, "reason": f"{root} does not exist here ({note})"}
            scratch = Path(tempfile.mkdtemp(prefix="storage-", dir=run.artifacts("bench")))
            note = f"{root} does not exist here; synthetic files in a scratch directory"
            root = scratch
        try:
            result = storage.run(root, cfg, allow_synthetic=allow, engine=opts.storage_engine)
        except (OSError, ValueError) as exc:
            return {"skipped": True, "reason": str(exc)}
        finally:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
        total = result["throughput_mb_s"]
        return {"note": note, "path": result["path"], "throughput_mb_s": total, "nodes": [result]}
    nodes = nodes_of(spec, points[-1].vms, opts)
    py = remote_python(spec, opts)
    rdir = opts.remote_dir
    base = f"cd /tmp && {py} -m validation.bench.storage {root}"
    if rdir:
        base = f"cd {rdir} && PYTHONPATH={rdir} {py} -m validation.bench.storage {root}"
    base += " --quick" if opts.quick else ""
    base += f" --engine {opts.storage_engine}"
    log = run.artifacts("bench") / "storage.log"
    if allow:
        prep = launch.Launch(
            "storage prepare", [[*nodes[0].ssh_argv(), f"{base} --synthetic --prepare"]]
        )
        launch.execute(prep, log.with_name("storage-prepare.log"), timeout_s=600)
    cmds = [[*n.ssh_argv(), base] for n in nodes]
    results = launch.execute(launch.Launch("storage", cmds), log, timeout_s=600)
    per_node = [
        {**{k: v for k, v in r.items() if k != "wall_s"}, "node": n.name}
        for r, n in zip(results, nodes, strict=True)
        if r
    ]
    total = sum(r["throughput_mb_s"] for r in per_node)
    return {"note": note, "path": str(root), "throughput_mb_s": total, "nodes": per_node}


# -- engines of the vendors: nccl-tests, perftest -------------------------------------------
def run_nccl_tests(
    opts: BenchOptions,
    engine: Engine,
    run: RunDir,
    points: list[Point],
    installed: Path = nccltests.INSTALLED,
) -> dict[str, Any]:
    """all_reduce_perf on this machine's GPUs (local mode), or why it did not run; the
    record names the binary that ran and how it was found (`binary`, `found_by`)."""
    if not opts.local:
        return {
            "skipped": True,
            "reason": "across nodes all_reduce_perf needs an MPI build of nccl-tests and"
            " mpirun; the allreduce figures are the sweep's",
        }
    if engine.device != "cuda":
        return {"skipped": True, "reason": "no GPU here: nccl-tests drives GPUs only"}
    found = nccltests.locate(opts.nccl_tests, installed)
    if found is None:
        where = opts.nccl_tests or f"{nccltests.BINARY} on PATH or in {installed.parent}"
        return {"skipped": True, "reason": f"nccl-tests not installed ({where} not found)"}
    gpus = points[-1].gpus
    top = opts.max_bytes or ((64 << 20) if opts.quick else (1 << 30))
    log = run.artifacts("bench") / "nccl-tests.log"
    try:
        report = nccltests.run_local(found["binary"], gpus, top, log, timeout_s=opts.timeout_s)
    except (nccltests.NcclTestsParseError, OSError) as exc:
        return {"skipped": True, "reason": str(exc), "failed": True, **found}
    return {**report, **found}


def run_rdma(spec: Spec, opts: BenchOptions, run: RunDir, points: list[Point]) -> dict[str, Any]:
    """ib_write_bw between node pairs where every node has an RDMA device, else the reason."""
    if opts.local:
        return {"skipped": True, "reason": "one machine: RDMA is measured between node pairs"}
    vms = points[-1].vms
    if len(vms) < 2:
        return {"skipped": True, "reason": "one node: RDMA is measured between node pairs"}
    nodes = nodes_of(spec, vms, opts)
    log = run.artifacts("bench") / "rdma-probe.log"
    probe = launch.Launch("rdma probe", [[*n.ssh_argv(), perftest.PROBE] for n in nodes])
    try:
        answers = launch.execute_text(probe, log, timeout_s=60)
    except launch.LaunchError as exc:
        return {"skipped": True, "reason": f"could not ask the nodes: {exc}"}
    found = {n.name: perftest.parse_probe(text) for n, text in zip(nodes, answers, strict=True)}
    for n in nodes:
        why = perftest.skip_reason(n.name, found[n.name])
        if why:
            return {"skipped": True, "reason": why, "nodes": found}
    by_name = {n.name: n for n in nodes}
    results: list[dict[str, Any]] = []
    for a, b in perftest.pairs([n.name for n in nodes]):
        server, client = by_name[b], by_name[a]
        cuda = found[a]["cuda"] and found[b]["cuda"] and engine_gpus(spec, vms)
        dev_s, dev_c = found[b]["devices"][0], found[a]["devices"][0]
        job = launch.Launch(
            f"ib_write_bw {a} -> {b}",
            [
                [*server.ssh_argv(), perftest.server_command(dev_s, cuda)],
                [*client.ssh_argv(), perftest.client_command(server.address, dev_c, cuda)],
            ],
        )
        try:
            texts = launch.execute_text(job, run.artifacts("bench") / f"rdma-{a}-{b}.log")
            parsed = perftest.parse(texts[1])
        except (launch.LaunchError, perftest.PerftestParseError) as exc:
            results.append({"client": a, "server": b, "error": str(exc)})
            continue
        results.append({"client": a, "server": b, "use_cuda": bool(cuda), **parsed})
    return {"engine": perftest.BINARY, "pairs": results}


def engine_gpus(spec: Spec, vms: tuple[Vm, ...]) -> bool:
    return bool(vms) and (spec.template(vms[0].template).gpus or 0) > 0


# -- assembly ---------------------------------------------------------------------------------
def allreduce_result(
    raw: dict[str, Any],
    engine: Engine,
    cert: Certification,
    nic_gbps: float | None,
    option_gbps: float | None = None,
) -> AllreduceResult:
    """The sweep's figures with the link they crossed and what that link should carry
    (validation.bench.links): busbw judged against the line rate of THAT link."""
    points = raw["allreduce"]["points"]
    world = raw["world_size"]
    link = links.launch_link(raw)
    want = links.expectation(link, cert, nic_gbps, option_gbps) if world > 1 else None
    rate = want.line_rate_gbps if want else None
    top = sorted(points, key=lambda p: p["size_bytes"])[-3:]
    return AllreduceResult(
        backend=engine.name if engine.name == "horovod" else raw["backend"],
        device=raw["device"],
        world_size=world,
        points=[AllreducePoint(**p) for p in points],
        line_rate_gbps=rate,
        busbw_fraction=busbw_fraction(points, rate) if world > 1 else None,
        note=WORLD1_NOTE if world == 1 else None,
        link=link.topology,
        link_detail=link.detail or None,
        link_source=want.source if want else None,
        expected_busbw_gbps=want.busbw_gbps if want else None,
        busbw_largest_gbps=sum(p["busbw_gbps"] for p in top) / len(top) if top else None,
        sys_crossing=link.sys_pairs,
    )


def scaling_result(measured: list[tuple[Point, dict[str, Any]]], engine: Engine) -> ScalingResult:
    rows = [
        {
            "nodes": p.nodes,
            "gpus": p.gpus,
            "images_per_sec": r["images_per_sec"],
            "images_per_sec_per_gpu": r["images_per_sec_per_gpu"],
            "spread": r["spread"],
            "warmup_s": r.get("warmup_s"),
        }
        for p, r in measured
    ]
    cfg = measured[0][1]["config"]
    base = min(measured, key=lambda m: m[0].gpus)[0]
    unit = "GPU" if engine.device == "cuda" else "rank"
    return ScalingResult(
        model=cfg["model"],
        batch_per_gpu=cfg["batch"],
        precision=cfg["precision"],
        channels_last=cfg["channels_last"],
        compiled=all(r["config"]["compiled"] for _p, r in measured),
        device=engine.device,
        backend=engine.name,
        baseline=f"{base.nodes} node(s), {base.gpus} {unit}(s)",
        points=[ScalingPoint(**row) for row in scaling(rows)],
    )


def naive_vs_default(raw: dict[str, Any]) -> dict[str, Any] | None:
    if "naive" not in raw or "resnet" not in raw:
        return None
    fast, slow = raw["resnet"], raw["naive"]
    return {
        "world_size": raw["world_size"],
        "naive": {
            "images_per_sec": slow["images_per_sec"],
            "spread": slow["spread"],
            "config": slow["config"],
        },
        "default": {
            "images_per_sec": fast["images_per_sec"],
            "spread": fast["spread"],
            "config": fast["config"],
            "warmup_s": fast["warmup_s"],
        },
        "ratio": fast["images_per_sec"] / slow["images_per_sec"],
    }


REFERENCES = {
    "plain": "plain loop: torch.compile, fp16 autocast + GradScaler, channels_last, plain SGD,"
    " no DDP wrapper",
    "horovod_ref": "Horovod synthetic-benchmark defaults: eager fp32, NCHW, batch 32, SGD"
    " without momentum",
}


def sys_note(pairs: list[str]) -> str:
    """What a figure carries when its GPUs talk across the sockets (SYS)."""
    return f" (through SYS, across sockets: {', '.join(pairs)})" if pairs else ""


def launch_entry(
    job: launch.Launch, tasks: list[str], log: Path, raw: dict[str, Any]
) -> dict[str, Any]:
    """bench.json's record of one launch (one process per rank, one configuration)."""
    return {
        "label": job.label,
        "tasks": tasks,
        "log": str(log),
        "commands": job.commands,
        "wall_s": raw.get("wall_s"),
        "ranks": raw.get("ranks"),
        "compile_cache": raw.get("compile_cache"),
        "exit_warning": raw.get("exit_warning"),
        **{key: raw.get(key) for key in ("resnet", "naive", "plain", "horovod_ref")},
    }


def describe(r: dict[str, Any]) -> str:
    """A training figure with what it was judged at, as MLPerf and the seed label theirs:
    images/s, precision, batch per GPU, the compile mode, and the warm-up it took."""
    c = r["config"]
    how = "eager"
    if c.get("compiled"):
        how = "compiled, CUDA graphs" if c.get("cuda_graphs") else "compiled"
    per_gpu = r.get("images_per_sec_per_gpu", r["images_per_sec"])
    return (
        f"{r['images_per_sec']:,.1f} images/s ({per_gpu:,.1f} per GPU) at {c['precision']},"
        f" batch {c['batch']}/GPU, {how}; warm-up {r['warmup_s']:.1f} s"
    )


def references(raw: dict[str, Any]) -> dict[str, Any] | None:
    """The reference loops measured in the same launch as the default, and the ratios of
    the default's images/s to each (per GPU, so batch sizes may differ)."""
    if "resnet" not in raw or not any(k in raw for k in REFERENCES):
        return None
    fast = raw["resnet"]
    out: dict[str, Any] = {"world_size": raw["world_size"], "default": _row(fast)}
    for key, what in REFERENCES.items():
        if key in raw:
            name = "horovod_defaults" if key == "horovod_ref" else key
            out[name] = {**_row(raw[key]), "description": what}
            out[f"default_vs_{name}"] = fast["images_per_sec"] / raw[key]["images_per_sec"]
    return out


def _row(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "images_per_sec": r["images_per_sec"],
        "spread": r["spread"],
        "warmup_s": r["warmup_s"],
        "loss_finite": r["loss_finite"],
        "config": r["config"],
    }


def write_record(
    run: RunDir, data: dict[str, Any], status: str, error: str | None, started: str
) -> BenchRecord:
    """bench.json as it stands. A node's long output (a crashed rank's stderr, a GPU name) is
    cut in the record; the launch logs under the run's bench artifacts keep the whole."""
    where = str(run.artifacts("bench").relative_to(run.path))
    capped = cap_strings(data, where=where)
    # The commands are rackcert's own (a remote shell line runs past the cut): kept whole.
    for kept, launched in zip(capped.get("launches", []), data.get("launches", []), strict=True):
        if "commands" in launched:
            kept["commands"] = launched["commands"]
    written = run.write_stage("bench", capped, status=status, error=error, started_at=started)
    assert isinstance(written, BenchRecord)
    return written


def run_bench(
    spec: Spec, run: RunDir, opts: BenchOptions, progress: Progress = lambda _m: None
) -> BenchRecord:
    """Run the whole bench into `run`; returns bench.json as written. Raises on a failed
    launch, after recording what was measured before it (status failed)."""
    started = utc_now()
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

    def record(status: str = "partial", error: str | None = None) -> BenchRecord:
        return write_record(run, data, status, error, started)

    k8s_counts = sorted({p.nodes for p in points}) if not opts.local else _k8s_counts(spec)
    per_node = points[0].procs_per_node if not opts.local else _k8s_gpus(spec)
    k8s_args = worker_args(opts, Engine("torch", "auto", "nccl"), ["allreduce", "resnet"])
    k8s_args = [a for a in k8s_args if a not in ("--device", "auto")]
    data["kubernetes"] = k8s.write_manifests(
        art / "k8s",
        rack=spec.metadata.name,
        node_counts=k8s_counts,
        gpus_per_node=per_node,
        image=opts.image,
        worker_args=k8s_args,
    )
    measured: list[tuple[Point, dict[str, Any]]] = []
    try:
        for point in points:
            tasks = _tasks(opts, engine, point, points)
            if not tasks:
                continue
            raw: dict[str, Any] = {}
            for group in launch_groups(opts, engine, tasks):
                job = build_launch(spec, opts, engine, point, group)
                progress(f"launch: {job.label}")
                log = art / f"launch-{point.nodes}n-{point.gpus}g-{'-'.join(group)}.log"
                one = launch.first_result(launch.execute(job, log, timeout_s=opts.timeout_s))
                placed = slurm_placement(data, log)
                data["launches"].append({**launch_entry(job, group, log, one), **placed})
                if one.get("exit_warning"):
                    data.setdefault("warnings", []).append(f"{job.label}: {one['exit_warning']}")
                    progress(f"  warning: {one['exit_warning']}")
                raw = {**raw, **one}
                data["environment"] = one.get("environment", {})
                if engine.device == "auto":  # nodes chose: the worker says what it ran on
                    engine = Engine(engine.worker_backend, one["device"], one["backend"])
                    data["launch"]["collectives"] = engine.name
                for task in group:
                    if task in one and task != "allreduce":
                        progress(f"  {task}: {describe(one[task])}")
                record()
            if "resnet" in raw:
                measured.append((point, raw["resnet"]))
                data["resnet50"] = scaling_result(measured, engine).model_dump()
            if "allreduce" in raw:
                ar = allreduce_result(
                    raw, engine, spec.certification, line_rate, opts.line_rate_gbps
                )
                data["allreduce"] = ar.model_dump()
                data["judge_link"] = ar.link_source is not None
                best = max(p.busbw_gbps for p in ar.points)
                progress(
                    f"  allreduce: {len(ar.points)} sizes, best busbw {best:.3g} GB/s"
                    f" over {ar.link or 'no link'}{sys_note(ar.sys_crossing)}"
                )
            refs = references(raw)
            if refs:
                data["references"] = refs
                for name in ("plain", "horovod_defaults"):
                    if name in refs:
                        progress(
                            f"  {name} {refs[name]['images_per_sec']:.1f} images/s: default"
                            f" x{refs[f'default_vs_{name}']:.2f}"
                        )
            comparison = naive_vs_default(raw)
            if comparison:
                data["naive_vs_default"] = comparison
                progress(
                    f"  naive {comparison['naive']['images_per_sec']:.1f} vs default"
                    f" {comparison['default']['images_per_sec']:.1f} images/s:"
                    f" x{comparison['ratio']:.2f}"
                )
            record()
        if "allreduce" not in opts.skip:
            data["nccl_tests"] = run_nccl_tests(opts, engine, run, points)
            nt = data["nccl_tests"]
            if not nt.get("skipped"):
                progress(f"  nccl-tests: avg busbw {nt['avg_busbw_gbps']} GB/s")
                if "allreduce" in data:
                    data["allreduce_side_by_side"] = nccltests.side_by_side(
                        nt, data["allreduce"]["points"]
                    )
            record()
        if "rdma" not in opts.skip:
            data["rdma"] = run_rdma(spec, opts, run, points)
            record()
        if "storage" not in opts.skip:
            progress("storage: parallel random reads")
            data["storage"] = run_storage(spec, opts, run, points)
    except RackcertError as exc:
        data["verdict"] = None
        record("failed", str(exc))
        raise
    ar_model = AllreduceResult(**data["allreduce"]) if "allreduce" in data else None
    sc_model = ScalingResult(**data["resnet50"]) if "resnet50" in data else None
    judged = verdict.judge(
        spec.certification,
        ar_model,
        sc_model,
        [r for _p, r in measured],
        data.get("storage"),
        judge_link=data["judge_link"],
        required=spec.required_checks(),
    )
    data["verdict"] = judged.model_dump()
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
