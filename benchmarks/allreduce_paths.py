"""Allreduce across two lab nodes by engine path: how fast, and how many bytes cross the link.

Why: the demo judges `allreduce.busbw_fraction` on the lab's shaped links (0.1 Gb/s, tbf both
ways, rackcert.lab.linkshape). Under torch.distributed over Gloo it read ~1.0 of the line rate;
under Horovod 0.65-0.93 (issue 56). Either a path sends more over the link than a ring does
(2(n-1)/n x size per node and direction, 1.5 x size for 4 ranks), or it sends the same bytes
slower. This bench tells the two apart: per path and run, the demo's own figure (the quick
sweep of validation.bench.node.allreduce_loop, busbw of its three largest sizes against the
line rate, as validation.bench.units.allreduce judges it), then a loop of allreduces of one
size with each node's link counters read around it.

Setup, as the lab has it: two SSH test hosts (rackcert.lab.sshhosts) on a private /24, MTU
9000, both directions of each host's link shaped to 100 Mbit/s; the lab DL stack (torch,
Horovod built with Gloo and MPI) through the hosts' system Python; 2 ranks per node (the
lab's 2-GPU VMs), 4 ranks. Paths (`--paths`):

- torch-gloo: torchrun on each node, torch.distributed over Gloo (the demo without Horovod);
- hvd-gloo: horovodrun --gloo from node1, Horovod's Gloo controller and operations (the
  demo with Horovod: Horovod's CPU operations default to Gloo as set-up builds it), each
  rank waiting for its allreduce as the bench's HorovodComm does (where more ranks than
  cores share the machine, as here: polling the handle with 0.5 ms naps);
- hvd-gloo-sync: the same, each rank waiting in hvd.synchronize (Horovod 0.28's own wait, a
  sched_yield loop that keeps the waiting thread runnable, competing for the cores with
  the threads that move the bytes; how the bench waited before);
- hvd-gloo-hier: hvd-gloo with HOROVOD_HIERARCHICAL_ALLREDUCE=1 (Horovod 0.28.1 turns it off
  where it has no NCCL: the same path again, so its spread is the machine's);
- hvd-mpi: mpirun from node1, Horovod with MPI controller and MPI operations (Open MPI's
  tuned allreduce, its own choice of algorithm; the bench's wait as for hvd-gloo);
- hvd-mpi-hier: the same with HOROVOD_HIERARCHICAL_ALLREDUCE=1;
- hvd-mpi-ring: the same with Open MPI's allreduce pinned to ring
  (coll_tuned_use_dynamic_rules=1, coll_tuned_allreduce_algorithm=4);
- hvd-mpi-yield: hvd-mpi with mpi_yield_when_idle=1 (Open MPI busy-polls its transports
  unless it knows a node is oversubscribed, which 2 slots per host do not tell it).

Columns: `busbw` the demo's figure (fraction of the line rate; the rule is >= 0.7); `busbw@S`
the fraction over the counted loop at size S; `tx/S` the bytes each node's eth0 sent per
allreduce over S (a ring: 1.5; more means the algorithm sends more than a ring); `cpu` the
CPU seconds a rank spent per second of the counted loop (all its threads); `core wait` the
seconds its threads were runnable but waited for a core, per second of that loop (schedstat's
run_delay: 0 on cores of one's own); `fixed` a call's time whatever its size (the median of
the sweep's sizes up to 4 KiB, as the bench records it); `load` the
machine's 1-minute load average when the run started. `--cores C` puts each host's processes
under a cgroup v1 CPU quota of C cores (linkshape.cpu_quota): the figures that move with it
are CPU-bound, those that do not are the link's.

    .venv/bin/python benchmarks/allreduce_paths.py --runs 5 --json paths.json
    .venv/bin/python benchmarks/allreduce_paths.py --paths hvd-gloo --runs 3 --cores 0.5
    .venv/bin/python benchmarks/allreduce_paths.py --paths hvd-gloo-sync --ranks-per-node 1
    .venv/bin/python benchmarks/allreduce_paths.py --paths hvd-gloo,hvd-gloo-sync --demo-sweep

`--ranks-per-node 1` runs 2 ranks (no more than the machine's cores); `--demo-sweep` lets the
sweep double on past 1 MiB while a call's fixed time weighs, as the demo's CPU sweep does.

Needs root, openmpi-bin and the lab DL stack with Horovod (.ci/setup.d/45-lab-dl-stack.sh).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LINE_MBIT = 100.0
MARK = "ARPATHS_RESULT "
RANKS_PER_NODE = 2
MPI_RING = {
    "OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
    "OMPI_MCA_coll_tuned_allreduce_algorithm": "4",  # ring (Open MPI 4.1's coll/tuned)
}
HIER = {"HOROVOD_HIERARCHICAL_ALLREDUCE": "1"}


@dataclass(frozen=True)
class Path_:
    """One way of running the 4 ranks: launcher, worker backend, and the variables it adds."""

    launcher: str  # torchrun, horovodrun or mpirun
    backend: str  # torch or horovod
    env: dict[str, str] = field(default_factory=dict)


PATHS = {
    "torch-gloo": Path_("torchrun", "torch"),
    "hvd-gloo": Path_("horovodrun", "horovod"),
    "hvd-gloo-hier": Path_("horovodrun", "horovod", HIER),
    # hvd-gloo with each rank waiting in hvd.synchronize (a loop of sched_yield: the waiting
    # thread stays runnable) whatever the machine's cores
    "hvd-gloo-sync": Path_("horovodrun", "horovod", {"ARPATHS_WAIT": "sync"}),
    "hvd-mpi": Path_("mpirun", "horovod", {"HOROVOD_CPU_OPERATIONS": "MPI"}),
    "hvd-mpi-hier": Path_("mpirun", "horovod", {"HOROVOD_CPU_OPERATIONS": "MPI", **HIER}),
    "hvd-mpi-ring": Path_("mpirun", "horovod", {"HOROVOD_CPU_OPERATIONS": "MPI", **MPI_RING}),
    # hvd-mpi with Open MPI's progress loop yielding the core while it polls (it busy-polls
    # unless it knows the node is oversubscribed; the lab's -H a:2 slots do not say so)
    "hvd-mpi-yield": Path_(
        "mpirun", "horovod", {"HOROVOD_CPU_OPERATIONS": "MPI", "OMPI_MCA_mpi_yield_when_idle": "1"}
    ),
}


# -- the rank's side (runs on the nodes, under the node's Python) ------------------------------
def net_bytes() -> tuple[int, int]:
    """(rx, tx) bytes of this network namespace's interfaces but loopback (/proc/net/dev is
    the reader's namespace: on a lab node, its eth0, the veth whose other end is the switch)."""
    rx = tx = 0
    with open("/proc/net/dev") as f:
        for line in f.readlines()[2:]:
            name, data = line.split(":", 1)
            if name.strip() == "lo":
                continue
            cols = data.split()
            rx, tx = rx + int(cols[0]), tx + int(cols[8])
    return rx, tx


def cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def run_queue_s() -> float:
    """Seconds this process's threads (all of them: Horovod's background thread, Gloo's and
    Open MPI's) spent runnable but waiting for a core (schedstat's run_delay, summed over
    /proc/self/task): what CPU contention costs a rank, 0 on cores of its own."""
    total = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/schedstat") as f:
                total += int(f.read().split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9


def hvd_ops() -> str:
    import horovod.torch as hvd

    ops = [n for n, on in (("mpi", hvd.mpi_enabled()), ("gloo", hvd.gloo_enabled())) if on]
    return "+".join(ops) or "?"


def rank_main(args: argparse.Namespace) -> int:
    import torch

    from validation.bench.node import allreduce_loop, worker
    from validation.bench.node.allreduce_task import CPU_EXTEND_TO
    from validation.bench.node.comm import connect

    comm = connect(args.backend, "cpu")
    if os.environ.get("ARPATHS_WAIT") == "sync" and args.backend == "horovod":
        comm.poll_nap_s = 0.0  # type: ignore[attr-defined]
        comm.rank_wait = "hvd.synchronize (forced)"
    worker.cpu_threads("cpu")  # one intra-op thread per rank, as the bench's worker sets it
    ops = hvd_ops() if args.backend == "horovod" else comm.backend
    # The demo's sweep: quick, CPU: 8 B .. 1 MiB, 5 timed, 2 warm-up iterations.
    sizes = allreduce_loop.sweep_sizes(8, args.max_bytes)
    extend_to = CPU_EXTEND_TO if args.demo_sweep else None
    points = allreduce_loop.run_sweep(
        comm, sizes, iters=args.iters, warmup=args.warmup, extend_to=extend_to
    )
    buf = torch.zeros(args.count_bytes // 4)
    comm.allreduce_(buf)
    comm.barrier()
    net0, cpu0, rq0, t0 = net_bytes(), cpu_s(), run_queue_s(), time.perf_counter()
    for _ in range(args.count):
        comm.allreduce_(buf)
    wall = time.perf_counter() - t0
    cpu1, rq1 = cpu_s(), run_queue_s()
    # After the barrier: a rank's last sends may still sit in its socket and qdisc when its
    # own allreduce returns; once every rank has received everything, they have all left.
    comm.barrier()
    net1 = net_bytes()
    mine = {
        "rank": comm.rank,
        "host": os.uname().nodename,
        "local_rank": comm.local_rank,
        "rx": net1[0] - net0[0],
        "tx": net1[1] - net0[1],
        "cpu_s": cpu1 - cpu0,
        "run_queue_s": rq1 - rq0,
        "wall_s": wall,
    }
    rows = comm.allgather_object(mine)
    if comm.rank == 0:
        out = {"ops": ops, "world": comm.world_size, "points": points, "rows": rows,
               "wait": comm.rank_wait}  # fmt: skip
        print(MARK + json.dumps(out), flush=True)
    comm.close()
    return 0


# -- the controller's side -------------------------------------------------------------------
@dataclass
class Lab:
    hosts: list[Any]
    shared: Path
    python: str
    subnet: str


def _node_tree(shared: Path) -> str:
    """The rank's code where the nodes see it (/tmp is shared; the checkout is hidden): this
    file and validation/bench/node, the bench worker's package (torch and stdlib only)."""
    tree = shared / "pkg"
    for rel in ("validation/__init__.py", "validation/bench/__init__.py"):
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tree / rel)
    shutil.copytree(ROOT / "validation/bench/node", tree / "validation/bench/node")
    shutil.copy(Path(__file__), tree / "arpaths.py")
    return str(tree)


def _node_python(shared: Path) -> str:
    """A venv over the node image's system Python (its DL stack), with horovodrun beside it,
    as configure's dl_runtime role builds /opt/rackcert/venv."""
    venv = shared / "venv"
    subprocess.run(
        ["/usr/bin/python3", "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
        check=True,
    )
    run = venv / "bin" / "horovodrun"
    run.write_text(
        f"#!{venv}/bin/python\nimport sys\n\nfrom horovod.runner.launch import run_commandline\n\n"
        'if __name__ == "__main__":  # horovodrun\'s helpers start processes with "spawn"\n'
        "    sys.exit(run_commandline())\n"
    )
    run.chmod(0o755)
    return str(venv / "bin" / "python")


def _trust(hosts: list[Any], key_file: Path) -> None:
    """node1 reaches node2 as root with the lab's key, host keys pinned (what ssh_trust does)."""
    first = hosts[0]
    ssh = first.path("/root/.ssh")
    ssh.mkdir(mode=0o700, exist_ok=True)
    shutil.copy(key_file, ssh / "id_ed25519")
    (ssh / "id_ed25519").chmod(0o600)
    shutil.copy(first.known_hosts, ssh / "known_hosts")


@contextlib.contextmanager
def lab(base: Path) -> Iterator[Lab]:
    sys.path.insert(0, str(ROOT))
    from rackcert.lab import linkshape
    from rackcert.lab.sshhosts import network, start

    subnet = network.claim_subnet()
    hosts: list[Any] = []
    try:
        hosts = start.start_hosts(
            ["node1", "node2"], subnet, base / "id_ed25519", state_dir=base / "hosts", mtu=9000
        )
        linkshape.shape_hosts(hosts, LINE_MBIT / 1000)
        _trust(hosts, base / "id_ed25519")
        shared = base / "shared"
        shared.mkdir()
        yield Lab(hosts, shared, _node_python(shared), subnet)
    finally:
        start.stop_hosts(hosts)
        network.release_subnet(subnet)


def _env(pairs: dict[str, str]) -> str:
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(pairs.items()))


def commands(
    lb: Lab, path: Path_, rank_args: list[str], per_node: int = RANKS_PER_NODE
) -> list[tuple[Any, str]]:
    """(host, remote command) per ssh client: the demo's launch lines (validation.bench.launch)
    with this file's rank in place of the bench worker."""
    h1, h2 = lb.hosts
    py, tree = lb.python, str(lb.shared / "pkg")
    base = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONPATH": tree}
    rank = [py, f"{tree}/arpaths.py", "--rank", "--backend", path.backend, *rank_args]
    hostlist = f"{h1.address}:{per_node},{h2.address}:{per_node}"
    if path.launcher == "torchrun":
        rdzv = f"arpaths-{uuid.uuid4().hex[:8]}"
        tr = [py, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node",
              str(per_node), "--rdzv-backend", "c10d", "--rdzv-endpoint",
              f"{h1.address}:29400", "--rdzv-id", rdzv, "--max-restarts", "0",
              *rank[1:]]  # fmt: skip
        line = f"cd /tmp && env -i HOME=/root {_env({**base, **path.env})} {shlex.join(tr)}"
        return [(h1, line), (h2, line)]
    if path.launcher == "horovodrun":
        hr = [str(Path(py).parent / "horovodrun"), "--gloo", "-np", str(2 * per_node),
              "-H", hostlist, "--start-timeout", "120", "--network-interface", "eth0",
              *rank]  # fmt: skip
        return [(h1, f"cd /tmp && env -i HOME=/root {_env({**base, **path.env})} {shlex.join(hr)}")]
    named = {**base, **path.env}
    mr = ["mpirun", "--allow-run-as-root", "-np", str(2 * per_node), "-H", hostlist,
          "--bind-to", "none", "--map-by", "slot", "--mca", "btl_tcp_if_include", "eth0",
          "--mca", "oob_tcp_if_include", "eth0"]  # fmt: skip
    for key in sorted(named):
        mr += ["-x", f"{key}={named[key]}"]
    return [(h1, f"cd /tmp && env -i HOME=/root {_env(named)} {shlex.join([*mr, *rank])}")]


def launch(
    lb: Lab, path: Path_, rank_args: list[str], timeout: float, per_node: int = RANKS_PER_NODE
) -> dict[str, Any]:
    procs = [
        subprocess.Popen(
            ["ssh", *h.ssh_options(), "--", f"root@{h.address}", line],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for h, line in commands(lb, path, rank_args, per_node)
    ]
    outs = []
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            outs.append(p.communicate(timeout=max(1.0, deadline - time.monotonic()))[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise RuntimeError("launch timed out") from None
    text = "\n".join(outs)
    for line in text.splitlines():
        if MARK in line:
            return dict(json.loads(line.split(MARK, 1)[1]))
    why = [ln for ln in text.splitlines() if any(w in ln for w in ("rror", "not successful"))]
    raise RuntimeError(f"no result: {' | '.join(why[-6:]) or text[-500:]}")


def figures(raw: dict[str, Any], count_bytes: int) -> dict[str, Any]:
    """The demo's busbw figure, the counted loop's, bytes per allreduce per node, CPU use."""
    from validation.bench.node.allreduce_loop import fixed_time_us
    from validation.bench.units.allreduce import busbw_fraction_less_fixed

    top = sorted(raw["points"], key=lambda p: p["size_bytes"])[-3:]
    busbw = sum(p["busbw_gbps"] for p in top) / len(top) * 8 / (LINE_MBIT / 1000)
    rows = raw["rows"]
    n = raw["world"]
    per_node = {r["host"]: r for r in rows if r["local_rank"] == 0}
    count = raw["count"]
    tx = [r["tx"] / count / count_bytes for r in per_node.values()]
    rx = [r["rx"] / count / count_bytes for r in per_node.values()]
    wall = max(r["wall_s"] for r in rows)
    fixed = fixed_time_us(raw["points"])
    less = busbw_fraction_less_fixed(raw["points"], LINE_MBIT / 1000)
    loop_busbw = count_bytes * count / wall * 2 * (n - 1) / n * 8 / (LINE_MBIT * 1e6)
    return {
        "ops": raw["ops"],
        "wait": raw.get("wait"),
        "top_size": max(p["size_bytes"] for p in raw["points"]),
        "busbw": busbw,
        "loop_busbw": loop_busbw,
        "tx_per_size": max(tx),
        "rx_per_size": max(rx),
        "cpu_per_s": max(r["cpu_s"] / r["wall_s"] for r in rows),
        # seconds a rank's threads waited for a core per second of the loop (the most of any)
        "queue_per_s": max(r.get("run_queue_s", 0.0) / r["wall_s"] for r in rows),
        "fixed_ms": fixed / 1000 if fixed is not None else None,
        "less_fixed": less,
        "ranks": [(r["rank"], r["host"]) for r in sorted(rows, key=lambda r: r["rank"])],
        # per size: busbw as a fraction of the line rate, and the time (latency at 8 B)
        "sizes": {
            p["size_bytes"]: [round(p["busbw_gbps"] * 8 / (LINE_MBIT / 1000), 3), p["time_us"]]
            for p in raw["points"]
        },
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--backend", default="torch", help=argparse.SUPPRESS)
    p.add_argument("--paths", default=",".join(PATHS), help="comma list of " + ", ".join(PATHS))
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--max-bytes", type=int, default=1 << 20, help="sweep's largest (demo: 1 MiB)")
    p.add_argument("--iters", type=int, default=5, help="sweep's timed iterations (demo: 5)")
    p.add_argument("--warmup", type=int, default=2, help="sweep's warm-up (demo: 2)")
    p.add_argument("--demo-sweep", action="store_true", help="double on past --max-bytes"
                   " while a call's fixed time weighs (the demo's CPU sweep)")  # fmt: skip
    p.add_argument("--count-bytes", type=int, default=4 << 20, help="counted loop's size")
    p.add_argument("--count", type=int, default=6, help="allreduces in the counted loop")
    p.add_argument("--cores", type=float, help="CPU quota per host (cgroup v1), in cores")
    p.add_argument("--ranks-per-node", type=int, default=RANKS_PER_NODE, help="1: no more"
                   " ranks than the machine has cores (2 ranks on 2 cores)")  # fmt: skip
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--json", type=Path, help="write every run's figures here")
    args = p.parse_args()
    if args.rank:
        return rank_main(args)
    wanted = [w.strip() for w in args.paths.split(",") if w.strip()]
    unknown = [w for w in wanted if w not in PATHS]
    if unknown:
        p.error(f"unknown path(s) {unknown}: choose from {', '.join(PATHS)}")
    rank_args = ["--demo-sweep"] if args.demo_sweep else []
    rank_args += ["--max-bytes", str(args.max_bytes), "--iters", str(args.iters), "--warmup",
                 str(args.warmup), "--count-bytes", str(args.count_bytes), "--count",
                 str(args.count)]  # fmt: skip
    results: dict[str, list[dict[str, Any]]] = {w: [] for w in wanted}
    from rackcert.lab import linkshape

    with tempfile.TemporaryDirectory(prefix="arpaths-") as tmp, lab(Path(tmp)) as lb:
        os.chmod(tmp, 0o755)
        _node_tree(lb.shared)
        quota = contextlib.ExitStack()  # per-host CPU quotas, for the whole measurement when asked
        with quota:
            if args.cores:
                for h in lb.hosts:
                    quota.enter_context(linkshape.cpu_quota(h, args.cores))
            for run in range(args.runs):
                for name in wanted:  # interleaved: a slow minute of the machine hits every path
                    load = os.getloadavg()[0]
                    start = time.monotonic()
                    try:
                        raw = launch(lb, PATHS[name], rank_args, args.timeout, args.ranks_per_node)
                        raw["count"] = args.count
                        fig = figures(raw, args.count_bytes)
                    except RuntimeError as exc:
                        fig = {"error": str(exc)}
                    fig |= {"load": load, "wall_s": time.monotonic() - start}
                    results[name].append(fig)
                    print(f"run {run + 1} {name}: {_row(fig)}", flush=True)
    print(table(results, args.count_bytes))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


def _row(f: dict[str, Any]) -> str:
    if "error" in f:
        return f"error: {f['error'][-300:]} (load {f['load']:.2f})"
    return (
        f"ops {f['ops']}, busbw {f['busbw']:.3f}, busbw@loop {f['loop_busbw']:.3f},"
        f" tx/S {f['tx_per_size']:.3f}, rx/S {f['rx_per_size']:.3f}, cpu {f['cpu_per_s']:.2f},"
        f" queue {f['queue_per_s']:.2f}, fixed {f['fixed_ms'] or 0:.1f} ms,"
        f" less-fixed {f['less_fixed'] or 0:.3f},"
        f" top {f['top_size'] / (1 << 20):g} MiB, wait {(f['wait'] or '-')[:14]},"
        f" load {f['load']:.2f}, {f['wall_s']:.0f} s"
    )


def _col(runs: list[dict[str, Any]], key: str, fmt: str) -> str:
    vals = [r[key] for r in runs]
    return f"{' '.join(format(v, fmt) for v in vals)} (median {statistics.median(vals):{fmt}})"


def table(results: dict[str, list[dict[str, Any]]], count_bytes: int) -> str:
    mib = count_bytes / (1 << 20)
    head = (
        f"| path | ops | busbw (demo sweep) | busbw@{mib:g}MiB | tx/S per node (ring 1.5)"
        " | cpu/s per rank | core wait/s per rank | fixed ms | load |"
    )
    lines = [head, "|" + "---|" * 9]
    for name, runs in results.items():
        ok = [r for r in runs if "error" not in r]
        if not ok:
            lines.append(f"| {name} | - | {len(runs)} failed | | | | | | |")
            continue
        cols = [_col(ok, k, f) for k, f in (("busbw", ".2f"), ("loop_busbw", ".2f"),
                                            ("tx_per_size", ".3f"), ("cpu_per_s", ".2f"),
                                            ("queue_per_s", ".2f"), ("fixed_ms", ".0f"),
                                            ("load", ".1f"))]  # fmt: skip
        failed = f" ({len(runs) - len(ok)} failed)" if len(ok) < len(runs) else ""
        lines.append(f"| {name}{failed} | {ok[0]['ops']} | {' | '.join(cols)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
