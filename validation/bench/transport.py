"""One way to run commands on the nodes: `Transport.run(steps) -> answers`.

Why one: the bench's launches and every localisation round start processes on nodes and
wait for them; written once here (start at once, an optional barrier, a deadline, a
process group stopped whole, one log format), each way of reaching a node is only how a
step becomes a process:
- `LocalTransport`: `/bin/sh -c` on this machine (a node that is this machine);
- `SshTransport`: one `ssh` client per node of the step (rackcert.core.ssh_target);
- `SrunTransport`: one Slurm job step per step (`srun -w a,b -N2 --ntasks-per-node=1`),
  each task picking its part by SLURMD_NODENAME and naming itself in its first line; or,
  for a `Job`, one step whose nodes Slurm chooses (the bench's ranks, `--mpi=pmix`).
A step is one command per node, all started together; its answer is each node's output.
The bench's launches (validation.bench.launch, slurm_launch) and localisation's rounds
only build steps; the ssh and srun command lines are written here alone.

The barrier: every process prints READY when it is set to measure; once all have (or
ended), every one gets a line on stdin and they measure together. Under srun one step's
tasks share srun's stdin (`--input=all`, srun(1): "stdin is broadcast to all remote
tasks") and its labelled output (`--label`) says which task is ready.

A step's command on a node is a shell line, or a program's argv (a tuple) that this machine
starts without a shell; the argv becomes a shell line (`shell_line`) only where a shell
reads it: on the far side of ssh, or in an srun task's script.

srun's `--label` output is read here alone (`srun_label`), by the barrier, by the steps'
answers and by the bench's result parser (validation.bench.launch.parse_result); srun's own
environment is rackcert.core.slurm's `client_env`, as every Slurm client has it.

    answers = SshTransport().run([Step.on_all(nodes, "uname -r")], timeout_s=30)
    answers[0].output("lab-node1")
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rackcert.core.slurm.client import client_env
from rackcert.core.ssh_target import SshTarget
from validation.bench.stdin_control import StdinControl

READY = "READY"
NODE_TAG = "rackcert-node"  # a Slurm task's first line: `rackcert-node NAME`
_LABEL = re.compile(r"^\s*(\d+): ?(.*)$")  # srun --label's "<task>: " (padded when tasks >= 10)
POLL_S = 0.05

# PATH on the nodes for a launcher's children: the node's own tools, nothing of ours.
NODE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Node:
    """One node to start ranks on, reached over SSH (rackcert.core.ssh_target)."""

    name: str
    ssh: SshTarget

    @property
    def address(self) -> str:
        return self.ssh.host

    @property
    def port(self) -> int:
        return self.ssh.port

    def ssh_argv(self, *, tty: bool = False) -> list[str]:
        """`ssh ... -- user@host`: the remote command is appended by the caller."""
        return self.ssh.argv(tty=tty)


HERE = Node("localhost", SshTarget(host="localhost"))  # this machine (LocalTransport's node)


# -- processes: started at once, one deadline, stopped as a group -----------------------------
@dataclass
class Ran:
    """One process's end: exit code (124 on timeout), stdout, stderr, wall seconds, and
    whether it was stopped (the deadline passed, another failed under fail_fast, or all it
    served failed)."""

    rc: int
    out: str
    err: str
    wall_s: float
    stopped: bool = False


@dataclass(frozen=True)
class Proc:
    """A process to start here: argv, its environment (None: this one's), and how many READY
    lines (by distinct srun task label when `labelled`) it prints at the barrier."""

    argv: list[str]
    env: dict[str, str] | None = None
    ready: int = 1
    labelled: bool = False


def run_processes(
    procs: Sequence[Proc],
    timeout_s: float,
    *,
    barrier: bool = False,
    fail_fast: bool = False,
    merge_stderr: bool = False,
    cwd: str | None = None,
    control: StdinControl | None = None,
    controlled: Sequence[int] = (),
    served: Sequence[int] = (),
) -> list[Ran]:
    """Start every process at once and wait for all (or until `timeout_s`).

    Output goes to files (no pipe fills while another process is waited on). barrier: see
    the module's docstring. fail_fast: the first process to exit non-zero stops the others
    (a launch's ranks cannot finish without it); each process runs in a session of its own,
    so a stop reaches what it started (torchrun's ranks). control: the processes numbered
    in `controlled` keep their stdin open for it (validation.bench.stdin_control) until
    they end; every other process's stdin ends once they have started. served: once every
    process numbered here has failed (exited non-zero), the rest are stopped: they run only
    for them (a reference measured beside nodes that all failed would be compared to nothing).
    """
    with tempfile.TemporaryDirectory(prefix="rackcert-steps-") as tmp:
        outs = [Path(tmp, f"{i}.out") for i in range(len(procs))]
        errs = [Path(tmp, f"{i}.err") for i in range(len(procs))]
        started = time.monotonic()
        deadline = started + timeout_s
        running: list[subprocess.Popen[bytes]] = []
        for p, out, err in zip(procs, outs, errs, strict=True):
            with out.open("wb") as o, err.open("wb") as e:
                running.append(
                    subprocess.Popen(
                        p.argv,
                        stdin=subprocess.PIPE,
                        stdout=o,
                        stderr=subprocess.STDOUT if merge_stderr else e,
                        env=p.env,
                        cwd=cwd,
                        start_new_session=True,
                    )
                )
        ends: list[float | None] = [None] * len(running)
        timed_out = False
        if barrier:
            while time.monotonic() < deadline and not all(
                proc.poll() is not None or _ready(out, p)
                for p, proc, out in zip(procs, running, outs, strict=True)
            ):
                time.sleep(POLL_S)
        for i, proc in enumerate(running):  # the barrier's line, or an empty stdin
            try:
                assert proc.stdin is not None
                if barrier:
                    proc.stdin.write(b"GO\n")
                    proc.stdin.flush()
                if control is None or i not in controlled:
                    proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass
        if control is not None:
            labelled = any(procs[i].labelled for i in controlled)
            control.bind(
                [f for i in controlled if (f := running[i].stdin) is not None],
                [outs[i] for i in controlled],
                _unlabelled if labelled else str.strip,
            )
        failed = False
        while True:
            now = time.monotonic()
            for i, proc in enumerate(running):
                if ends[i] is None and proc.poll() is not None:
                    ends[i] = now - started
                    failed = failed or (fail_fast and proc.returncode != 0)
            if all(e is not None for e in ends) or failed:
                break
            if served and all(ends[i] is not None and running[i].returncode for i in served):
                break
            if now > deadline:
                timed_out = True
                break
            time.sleep(POLL_S)
        stopped = [proc.poll() is None for proc in running]
        if control is not None:
            control.close()
        for i, proc in enumerate(running):
            if stopped[i]:
                _stop(proc)
                ends[i] = time.monotonic() - started
        answers = []
        for proc, out, err, end, halted in zip(running, outs, errs, ends, stopped, strict=True):
            text = out.read_text(errors="replace")
            if barrier:
                text = "".join(ln for ln in text.splitlines(keepends=True) if not _is_ready(ln))
            etext = "" if merge_stderr else err.read_text(errors="replace")
            rc = proc.returncode
            if timed_out and halted:
                rc = 124
                etext += f"\ntimed out after {timeout_s:g} s"
            answers.append(Ran(rc, text, etext, end or 0.0, halted))
        return answers


def srun_label(line: str) -> tuple[str, str] | None:
    """srun --label's prefix read off one line: (the task's number, the rest of the line);
    None for a line without one (srun's own messages, an unlabelled launcher's output)."""
    m = _LABEL.match(line)
    return (m.group(1), m.group(2)) if m else None


def _unlabelled(line: str) -> str:
    """The line without srun's label, stripped."""
    labelled = srun_label(line)
    return (labelled[1] if labelled else line).strip()


def _is_ready(line: str) -> bool:
    return _unlabelled(line) == READY


def _ready(out: Path, p: Proc) -> bool:
    """Whether the process said READY (each of its `ready` tasks, when labelled)."""
    try:
        lines = out.read_text(errors="replace").splitlines()
    except OSError:
        return False
    if not p.labelled:
        return any(ln.strip() == READY for ln in lines)
    tasks = {t[0] for ln in lines if (t := srun_label(ln)) and t[1].strip() == READY}
    return len(tasks) >= p.ready


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop one child we started, and its own process group."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


# -- steps and answers ------------------------------------------------------------------------
# What a node of a step runs: a shell line, or a program's argv (started without a shell here).
Command = str | tuple[str, ...]


def shell_line(command: Command) -> str:
    """The command as a shell reads it: a line as it is, an argv quoted (shlex.join)."""
    return command if isinstance(command, str) else shlex.join(command)


@dataclass(frozen=True)
class Step:
    """Each of `nodes` runs its own command (`commands[i]` on `nodes[i]`; "" or () runs
    nothing there), all at once; `name` is the Slurm job name. A command is a shell line or
    a program's argv (`here`): the argv is rendered as a line only where a shell reads it."""

    nodes: tuple[Node, ...]
    commands: tuple[Command, ...]
    name: str = "rackcert-step"

    @classmethod
    def on_all(cls, nodes: Sequence[Node], command: str, name: str = "rackcert-step") -> Step:
        """The same line on every node."""
        return cls(tuple(nodes), tuple(command for _ in nodes), name)

    @classmethod
    def pair(cls, a: Node, b: Node, on_a: str, on_b: str, name: str = "rackcert-pair") -> Step:
        return cls((a, b), (on_a, on_b), name)

    @classmethod
    def here(cls, argv: Sequence[str], name: str = "rackcert-step") -> Step:
        """One program on this machine (LocalTransport), started as it is: its exit (a
        signal's included) is the step's."""
        return cls((HERE,), (tuple(argv),), name)


@dataclass(frozen=True)
class Job:
    """A step whose nodes the scheduler chooses (SrunTransport only): `nodes` nodes,
    `tasks_per_node` tasks on each, every task running `command` and taking its identity
    from the scheduler's environment; `gpus`: one GPU bound to each task."""

    nodes: int
    tasks_per_node: int
    command: str
    gpus: bool = False
    name: str = "rackcert-bench"


@dataclass
class Answer:
    """One step's end: its exit (the first non-zero of its processes), each node's output
    and error text by node name, the step's own error text, its wall seconds."""

    rc: int
    outputs: dict[str, str]
    errors: dict[str, str] = field(default_factory=dict)
    err: str = ""
    wall_s: float = 0.0
    argvs: list[list[str]] = field(default_factory=list)  # the processes started here
    ran: list[Ran] = field(default_factory=list)  # and their ends, in the same order

    def output(self, node: str) -> str:
        return self.outputs.get(node, "")

    def why(self, node: str | None = None) -> str:
        """The last line that says what went wrong: the node's error text, else its last
        output line, else the step's own (srun's) error line."""
        if node is not None:
            for text in (self.errors.get(node, ""), self.outputs.get(node, "")):
                lines = [ln for ln in text.strip().splitlines() if ln.strip()]
                if lines:
                    return lines[-1][:300]
        lines = self.err.strip().splitlines()
        return (lines or [f"exit {self.rc}, no output"])[-1][:300]


class Transport(ABC):
    """How a step reaches its nodes. `name` is written in the log; `persistent` says whether
    a daemon a step starts outlives the step (not under Slurm: a step's processes end with
    it), so that a link round can use daemons or must start one-off servers."""

    name: str = ""
    persistent: bool = True

    @abstractmethod
    def procs(self, step: Step | Job, barrier: bool) -> list[Proc]:
        """The processes that run the step here."""

    @abstractmethod
    def answer(self, step: Step | Job, ran: list[Ran]) -> Answer:
        """The step's answer from its processes' ends."""

    def processes(self, steps: Sequence[Step | Job], barrier: bool = False) -> list[Proc]:
        """Every process the steps start here, in order (what a launch's log shows)."""
        return [p for s in steps for p in self.procs(s, barrier)]

    def run(
        self,
        steps: Sequence[Step | Job],
        timeout_s: float,
        *,
        barrier: bool = False,
        fail_fast: bool = False,
        merge_stderr: bool = False,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        log: Path | None = None,
        title: str = "",
        control: StdinControl | None = None,
    ) -> list[Answer]:
        """Every step at once; one answer per step, in order; logged under `title`.

        fail_fast, merge_stderr and cwd as run_processes; `env`, when given, is the
        environment of every process started here that has none of its own (srun has its
        own: a Slurm client's, SrunTarget.env); `control` reaches the processes of the step
        it names (validation.bench.stdin_control).
        """
        per_step = [self.procs(s, barrier) for s in steps]
        if env is not None:
            per_step = [
                [p if p.env is not None else Proc(p.argv, env, p.ready, p.labelled) for p in ps]
                for ps in per_step
            ]
        flat = [p for ps in per_step for p in ps]
        controlled: list[int] = []
        if control is not None:
            at = 0
            for step, ps in zip(steps, per_step, strict=True):
                if step.name == control.step_name:
                    controlled += range(at, at + len(ps))
                at += len(ps)
        ran = run_processes(
            flat, timeout_s, barrier=barrier, fail_fast=fail_fast, merge_stderr=merge_stderr,
            cwd=cwd, control=control, controlled=controlled,
        )  # fmt: skip
        answers, at = [], 0
        for step, ps in zip(steps, per_step, strict=True):
            mine = ran[at : at + len(ps)]
            answer = self.answer(step, mine)
            answer.argvs, answer.ran = [p.argv for p in ps], mine
            answers.append(answer)
            at += len(ps)
        write_log(log, f"{self.name} {title}".strip(), answers)
        return answers


class _PerNode(Transport):
    """One process per node of the step (its command empty: none)."""

    @abstractmethod
    def argv(self, node: Node, command: Command) -> list[str]: ...

    def procs(self, step: Step | Job, barrier: bool) -> list[Proc]:
        step = _named(step, self.name)
        pairs = zip(step.nodes, step.commands, strict=True)
        return [Proc(self.argv(n, c)) for n, c in pairs if c]

    def answer(self, step: Step | Job, ran: list[Ran]) -> Answer:
        step = _named(step, self.name)
        it = iter(ran)
        outputs, errors, rcs, walls = {}, {}, [], []
        for n, c in zip(step.nodes, step.commands, strict=True):
            if not c:
                continue
            r = next(it)
            outputs[n.name], errors[n.name] = r.out, r.err
            rcs.append(r.rc)
            walls.append(r.wall_s)
        rc = next((c for c in rcs if c), 0)
        return Answer(rc, outputs, errors, "\n".join(errors.values()), max(walls, default=0.0))


def _named(step: Step | Job, transport: str) -> Step:
    """The step itself: only a scheduler places a Job's nodes."""
    if isinstance(step, Job):
        raise TypeError(f"a Job's nodes are chosen by Slurm: run it with srun, not {transport}")
    return step


class SshTransport(_PerNode):
    """`ssh ... -- user@host LINE` per node (the node's SshTarget: pinned keys, timeouts).

    tty: `ssh -tt`, for a launcher that must end with its client: the remote command hangs
    on a pty, so stopping the local ssh client (a rank failed, the launch timed out) hangs
    it up instead of leaving ranks behind.
    """

    name = "ssh"

    def __init__(self, *, tty: bool = False) -> None:
        self.tty = tty

    def argv(self, node: Node, command: Command) -> list[str]:
        return [*node.ssh_argv(tty=self.tty), shell_line(command)]  # the node's shell runs it


class LocalTransport(_PerNode):
    """`/bin/sh -c LINE` here (a program's argv as it is), whatever the node (a rack of one:
    this machine)."""

    name = "local"

    def argv(self, node: Node, command: Command) -> list[str]:
        return ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)


@dataclass(frozen=True)
class SrunTarget:
    """Where the steps go: the spec's slurm block and the bench's reservation."""

    partition: str | None = None
    reservation: str | None = None
    immediate_s: int = 60
    client_conf: str | None = None

    def env(self) -> dict[str, str]:
        """srun's own environment: a Slurm client's (rackcert.core.slurm.client_env), with the
        client configuration when the spec names one. Its tasks get none of it
        (`--export=NONE`): what a task needs, its script sets."""
        return client_env(self.client_conf)


class SrunTransport(Transport):
    """One Slurm job step per step: one task on each of its nodes, labelled output, stdin to
    every task. Slurm orders a step's tasks by its own node list, not by `-w`'s order, so
    each task picks its part by its node's name and names itself in its first line."""

    name = "srun"
    persistent = False

    def __init__(self, target: SrunTarget) -> None:
        self.target = target

    def procs(self, step: Step | Job, barrier: bool) -> list[Proc]:
        if isinstance(step, Job):
            argv = [*job_argv(self.target, step), "/bin/sh", "-c", step.command]
            return [Proc(argv, self.target.env())]
        names = [n.name for n in step.nodes]
        lines = [shell_line(c) for c in step.commands]  # the task's shell reads them
        body = lines[0] if len(set(lines)) == 1 else by_node(dict(zip(names, lines, strict=True)))
        argv = [*step_argv(self.target, names, step.name), "/bin/sh", "-c", task_script(body)]
        return [Proc(argv, self.target.env(), ready=len(names), labelled=True)]

    def answer(self, step: Step | Job, ran: list[Ran]) -> Answer:
        (r,) = ran
        if isinstance(step, Job):  # each task's lines by its label (Slurm named the nodes)
            return Answer(r.rc, task_lines(r.out), {}, r.err, r.wall_s)
        lines = node_lines(r.out)
        outputs = {name: "\n".join(ls) for name, ls in lines.items()}
        return Answer(r.rc, outputs, {}, r.err, r.wall_s)


def step_argv(target: SrunTarget, names: Sequence[str], job_name: str) -> list[str]:
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
    return [*argv, *_where(target)]


def job_argv(target: SrunTarget, job: Job) -> list[str]:
    """One step that Slurm places: the shape of the job (nodes, tasks, a GPU per task, whole
    nodes) and how long it may wait to be placed (`--immediate`, srun(1): "exit if
    resources are not available within the time period specified")."""
    argv = [
        "srun",
        "--mpi=pmix",
        f"--nodes={job.nodes}",
        f"--ntasks-per-node={job.tasks_per_node}",
        "--exclusive",
        f"--immediate={target.immediate_s}",
        f"--job-name={job.name}",
        "--export=NONE",
        "--kill-on-bad-exit=1",
        # Whole lines, each with its task: with --unbuffered slurmstepd forwards raw chunks
        # (a pty per task), and rank 0's long result line was seen cut by rank 1's output.
        # Without it each task's output arrives line by line (PYTHONUNBUFFERED in the task
        # keeps them prompt), and --label prefixes "<task>: ", which the result parser reads
        # past.
        "--label",
        "--chdir=/tmp",  # this checkout's directory is no path on the nodes
    ]
    if job.gpus:
        argv.append("--gpus-per-task=1")
    return [*argv, *_where(target)]


def _where(target: SrunTarget) -> list[str]:
    """The partition and reservation a step asks for, where the spec and the bench name them."""
    named = (("partition", target.partition), ("reservation", target.reservation))
    return [f"--{option}={value}" for option, value in named if value]


def task_lines(text: str) -> dict[str, str]:
    """A labelled step's output by task: `{"0": "...", "1": "..."}`."""
    tasks: dict[str, list[str]] = {}
    for line in text.splitlines():
        if labelled := srun_label(line):
            tasks.setdefault(labelled[0], []).append(labelled[1])
    return {task: "\n".join(lines) for task, lines in tasks.items()}


def task_script(body: str) -> str:
    """A task's shell: PATH, the node's name first, then `body` (SLURMD_NODENAME set)."""
    return f'export PATH={NODE_PATH}; echo "{NODE_TAG} $SLURMD_NODENAME"; {body}'


def by_node(cases: dict[str, str], default: str = "exit 0") -> str:
    """`case $SLURMD_NODENAME in a) ...;; b) ...;; esac`: each node's own part."""
    arms = " ".join(f"{shlex.quote(n)}) {cmd};;" for n, cmd in cases.items() if cmd)
    return f'case "$SLURMD_NODENAME" in {arms} *) {default};; esac'


def node_lines(text: str) -> dict[str, list[str]]:
    """A labelled step's output: each task's lines after its `rackcert-node NAME` line."""
    tasks: dict[int, list[str]] = {}
    for line in text.splitlines():
        if labelled := srun_label(line):
            tasks.setdefault(int(labelled[0]), []).append(labelled[1])
    out: dict[str, list[str]] = {}
    for lines in tasks.values():
        at = next((i for i, ln in enumerate(lines) if ln.startswith(NODE_TAG + " ")), None)
        if at is not None:
            out[lines[at].split()[1]] = lines[at + 1 :]
    return out


def write_log(log: Path | None, title: str, answers: Sequence[Answer]) -> None:
    """Append each answer, each node's output under its name, to the stage's log."""
    if log is None:
        return
    with log.open("a") as f:
        for i, a in enumerate(answers):
            f.write(f"== {title} #{i} rc={a.rc} {a.wall_s:.2f}s\n")
            for name, text in a.outputs.items():
                f.write("".join(f"{name}: {ln}\n" for ln in text.splitlines()))
            f.write(a.err + "\n")
