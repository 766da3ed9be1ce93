"""Localisation as Slurm job steps (`rackcert bench --localise --launcher srun`).

Why: on a site that schedules with Slurm, nothing reaches the nodes by SSH from a
controller; the localisation's measurements must be Slurm jobs like every other bench
run (validation.bench.slurm_launch). The stages and the record are the SSH path's
(validation.bench.localisation.stages), only the way the commands reach the nodes differs:
- the per-node stage is one step on all nodes (`srun -w a,b,.. -N n --ntasks-per-node=1`),
  the probe's barrier kept: every task prints READY (srun's `--label` says which task),
  and once all have, one line on srun's stdin reaches every task (`--input=all`, srun(1):
  "stdin is broadcast to all remote tasks");
- each round of the link stage is one step per pair, on the pair's two nodes
  (`srun -w a,b -N2`), all pairs of the round at once: on the pair's first node the
  iperf3 client, on the second a one-off server (`iperf3 -s -1`, iperf3(1): "handle one
  client connection, then exit") whose output goes nowhere, so the step's output is the
  client's. Where every node has RDMA, ib_write_bw then ib_write_lat the same way.
Slurm orders a step's tasks by its own node list, not by `-w`'s order, so each task picks
its part by its node's name (SLURMD_NODENAME), and names itself in its first line.

A pair whose iperf3 gave no figure is measured once more: iperf3 -J can exit 0 with an
"error" key in its JSON (e.g. "the server is busy running a test", when a connection of
the first try's retry loop reached the one-off server first).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from validation.bench import perftest
from validation.bench.launch import NODE_PATH, Node
from validation.bench.localisation import linkprobe
from validation.bench.node import pair_allreduce

NODE_TAG = "rackcert-node"
_LABEL = re.compile(r"^\s*(\d+): ?(.*)$")
LAT_MARK = "rackcert-lat"  # between ib_write_bw's and ib_write_lat's output in one step
SERVER_WAIT_S = 30  # how long a pair's client waits for its server's task to listen


@dataclass(frozen=True)
class SrunTarget:
    """Where the steps go: the spec's slurm block and the bench's reservation."""

    partition: str | None = None
    reservation: str | None = None
    immediate_s: int = 60
    client_conf: str | None = None

    def env(self) -> dict[str, str]:
        """srun's own environment: the client configuration when the spec names one."""
        base = {"PATH": NODE_PATH, "LANG": "C.UTF-8"}
        return {**base, "SLURM_CONF": self.client_conf} if self.client_conf else base


@dataclass
class StepAnswer:
    """One step: srun's exit, each task's output lines by task id, srun's stderr."""

    rc: int
    tasks: dict[int, list[str]]
    err: str
    wall_s: float

    def node_lines(self) -> dict[str, list[str]]:
        """Each task's lines after its `rackcert-node NAME` line, by node name."""
        out: dict[str, list[str]] = {}
        for lines in self.tasks.values():
            name = next((ln.split()[1] for ln in lines if ln.startswith(NODE_TAG + " ")), None)
            if name:
                i = next(i for i, ln in enumerate(lines) if ln.startswith(NODE_TAG + " "))
                out[name] = lines[i + 1 :]
        return out

    def why(self) -> str:
        return (self.err.strip().splitlines() or [f"srun exit {self.rc}, no output"])[-1][:300]


def srun_argv(target: SrunTarget, names: Sequence[str], job_name: str) -> list[str]:
    """One step: one task on each named node, labelled output, stdin to every task."""
    argv = [
        "srun",
        f"--nodelist={','.join(names)}",
        f"--nodes={len(names)}",
        "--ntasks-per-node=1",
        f"--immediate={target.immediate_s}",
        f"--job-name={job_name}",
        "--export=NONE",
        "--mpi=none",  # plain processes: no PMIx server to start per step
        "--label",
        "--input=all",
        "--chdir=/tmp",
    ]
    if target.partition:
        argv.append(f"--partition={target.partition}")
    if target.reservation:
        argv.append(f"--reservation={target.reservation}")
    return argv


def task_script(body: str) -> str:
    """A task's shell: PATH, the node's name first, then `body` (SLURMD_NODENAME set)."""
    return f'export PATH={NODE_PATH}; echo "{NODE_TAG} $SLURMD_NODENAME"; {body}'


def by_node(cases: dict[str, str], default: str = "exit 0") -> str:
    """`case $SLURMD_NODENAME in a) ...;; b) ...;; esac`: each node's own part."""
    arms = " ".join(f"{shlex.quote(n)}) {cmd};;" for n, cmd in cases.items())
    return f'case "$SLURMD_NODENAME" in {arms} *) {default};; esac'


def _split(text: str) -> dict[int, list[str]]:
    tasks: dict[int, list[str]] = {}
    for line in text.splitlines():
        if m := _LABEL.match(line):
            tasks.setdefault(int(m.group(1)), []).append(m.group(2))
    return tasks


def run_steps(
    steps: Sequence[tuple[list[str], str]],
    target: SrunTarget,
    timeout_s: float,
    *,
    barrier: int = 0,
) -> list[StepAnswer]:
    """Start every step (srun argv, task script) at once and wait for all.

    barrier: the number of tasks of the (single) step that must print READY before one
    line on stdin releases them all to measure together.
    """
    procs = [
        subprocess.Popen(
            [*argv, "/bin/sh", "-c", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=target.env(),
        )
        for argv, script in steps
    ]
    t0 = time.monotonic()
    early = ["" for _ in procs]
    if barrier:
        _wait_ready(procs[0], barrier, timeout_s, early)
    answers = []
    for i, p in enumerate(procs):
        left = max(1.0, timeout_s - (time.monotonic() - t0))
        try:
            so, se = p.communicate("GO\n" if barrier else "", timeout=left)
        except subprocess.TimeoutExpired:
            p.kill()
            so, se = p.communicate()
            se += f"\ntimed out after {timeout_s:g} s"
        answers.append(StepAnswer(p.returncode, _split(early[i] + so), se, time.monotonic() - t0))
    return answers


def _wait_ready(
    proc: subprocess.Popen[str], tasks: int, timeout_s: float, early: list[str]
) -> None:
    """Read the step's labelled lines until `tasks` tasks said READY (or the step ended)."""
    ready: set[int] = set()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            m = _LABEL.match(line)
            if m and m.group(2).strip() == "READY":
                ready.add(int(m.group(1)))
                if len(ready) >= tasks:
                    return
            else:
                early[0] += line

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout_s)


def _log(log: Path | None, title: str, answers: Sequence[StepAnswer]) -> None:
    if log is None:
        return
    with log.open("a") as f:
        for i, a in enumerate(answers):
            f.write(f"== srun {title} #{i} rc={a.rc} {a.wall_s:.2f}s\n")
            for task, lines in sorted(a.tasks.items()):
                f.write("".join(f"{task}: {ln}\n" for ln in lines))
            f.write(a.err + "\n")


# -- the per-node stage: one step on all nodes ---------------------------------------------
def node_stage(
    nodes: list[Node], probe_line: str, target: SrunTarget, timeout_s: float, log: Path | None
) -> list[dict[str, Any]]:
    """The probe on every node as one step, the timed loops started at one barrier."""
    import json

    names = [n.name for n in nodes]
    step = (srun_argv(target, names, "rackcert-localise-nodes"), task_script(probe_line))
    (ans,) = run_steps([step], target, timeout_s, barrier=len(nodes))
    _log(log, "node stage", [ans])
    lines = ans.node_lines()
    out = []
    for n in nodes:
        mine = [ln for ln in lines.get(n.name, []) if ln.strip()]
        try:
            figures = json.loads(mine[-1]) if mine else None
        except ValueError:
            figures = None
        if isinstance(figures, dict):
            out.append(
                {**figures, "node": n.name, "reported_hostname": figures.get("node"), "error": None}
            )
        else:
            why = mine[-1][:300] if mine else f"no answer from the Slurm step: {ans.why()}"
            out.append({"node": n.name, "error": why, "units": [], "smi": [], "allreduce": None})
    return out


def rdma_ready(nodes: list[Node], target: SrunTarget, log: Path | None) -> str | None:
    """None when every node has an RDMA device and perftest (one step on all nodes)."""
    names = [n.name for n in nodes]
    step = (srun_argv(target, names, "rackcert-localise-rdma"), task_script(perftest.PROBE))
    (ans,) = run_steps([step], target, 60)
    _log(log, "rdma probe", [ans])
    lines = ans.node_lines()
    for n in nodes:
        if n.name not in lines:
            return f"{n.name}: no answer from the Slurm step ({ans.why()})"
        why = perftest.skip_reason(n.name, perftest.parse_probe("\n".join(lines[n.name])))
        if why:
            return why
    return None


# -- the link stage: one step per pair ------------------------------------------------------
def pair_script(a: Node, b: Node, engine: str, seconds: int) -> str:
    """The pair's step: the client on a, the server on b (its output dropped)."""
    if engine == "iperf3":
        # A step's tasks start when each node's Prolog is done (a site's health check: seconds
        # apart on a busy rack), so the client retries a refused connection for SERVER_WAIT_S.
        server = (
            f"timeout {seconds + SERVER_WAIT_S + 30} {linkprobe.IPERF3} -s -1 -p {linkprobe.PORT}"
        )
        client = linkprobe.client_command(b.address, seconds, tries=int(SERVER_WAIT_S / 0.3))
    else:
        port = perftest.PORT + 1
        server = f"{perftest.server_command(None, False)}; {linkprobe.lat_server(None, port)}"
        client = (
            f"{perftest.client_command(b.address, None, False)}; echo {LAT_MARK};"
            f" {linkprobe.lat_client(b.address, None, port)}"
        )
    return task_script(by_node({a.name: client, b.name: f"{server} >/dev/null 2>&1"}))


def link_round(
    i: int,
    rnd: list[tuple[str, str]],
    by_name: dict[str, Node],
    engine: str,
    seconds: int,
    target: SrunTarget,
    timeout_s: float,
    log: Path | None,
) -> list[dict[str, Any]]:
    """One step per pair of the round, all at once; a pair without a figure once more."""
    rows = _pairs(i, rnd, by_name, engine, seconds, target, timeout_s, log)
    again = [j for j, r in enumerate(rows) if r["error"]]
    if again:
        retry = _pairs(i, [rnd[j] for j in again], by_name, engine, seconds, target,
                       timeout_s, log)  # fmt: skip
        for j, row in zip(again, retry, strict=True):
            row["attempts"] = 2
            row["first_error"] = rows[j]["error"]
            rows[j] = row
    return rows


def _pairs(
    i: int,
    rnd: list[tuple[str, str]],
    by_name: dict[str, Node],
    engine: str,
    seconds: int,
    target: SrunTarget,
    timeout_s: float,
    log: Path | None,
) -> list[dict[str, Any]]:
    steps = [
        (
            srun_argv(target, [a, b], "rackcert-localise-link"),
            pair_script(by_name[a], by_name[b], engine, seconds),
        )
        for a, b in rnd
    ]
    answers = run_steps(steps, target, timeout_s)
    _log(log, f"round {i} {engine}", answers)
    out = []
    for (a, b), ans in zip(rnd, answers, strict=True):
        text = "\n".join(ans.node_lines().get(a, []))
        row: dict[str, Any] = {"a": a, "b": b, "round": i, "engine": engine,
                               "wall_s": ans.wall_s, "latency_us": None, "error": None,
                               "attempts": 1}  # fmt: skip
        if not text.strip():
            row.update(gbps=None, error=f"no answer from the Slurm step: {ans.why()}")
        elif engine == "iperf3":
            row.update(linkprobe.iperf3_figures(text))
        else:
            bw, _, lat = text.partition(LAT_MARK)
            row.update(linkprobe.rdma_figures(bw, lat))
        out.append(row)
    return out


def pair_allreduce_round(
    i: int,
    rnd: list[tuple[str, str]],
    by_name: dict[str, Node],
    opts: Any,
    target: SrunTarget,
    log: Path | None,
    rows: list[dict[str, Any]],
) -> None:
    """Every pair's two-rank allreduce, one step per pair, all at once (rank 0 on the
    pair's first node); `allreduce` added to each row."""
    steps = []
    for a, b in rnd:
        na, nb = by_name[a], by_name[b]
        ranks = {
            name: pair_allreduce.command(opts.python, r, na.address, nb.address, device=opts.device)
            for r, name in ((0, a), (1, b))
        }
        steps.append((srun_argv(target, [a, b], "rackcert-localise-allreduce"),
                      task_script(by_node(ranks))))  # fmt: skip
    answers = run_steps(steps, target, opts.timeout_s)
    _log(log, f"round {i} pair allreduce", answers)
    for (a, _b), ans, row in zip(rnd, answers, rows, strict=True):
        text = "\n".join(ans.node_lines().get(a, []))
        row["allreduce"] = pair_allreduce.row_figures(text or f"no answer: {ans.why()}")
        row["allreduce"]["wall_s"] = ans.wall_s
