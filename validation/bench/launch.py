"""Start bench workers through existing engines: torchrun (c10d rendezvous) or horovodrun.

No process manager of our own: locally one `torchrun --standalone --nproc-per-node G`
(or `horovodrun --gloo -np G -H localhost:G`); across nodes torchrun on every node, each
with the same c10d rendezvous endpoint (the first node) and id, or one `horovodrun -H
a:G,b:G` (or mpirun) on the first node that uses SSH itself. This module builds those
as steps (what runs on which node, with which environment: pure functions, tested
without hosts) and hands them to a transport (validation.bench.transport: ssh, srun or
this machine, whose command lines are written there alone): all at once, output to a
log file, rank 0's `RACKCERT_RESULT` line parsed from whichever node printed it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rackcert.core.errors import RackcertError
from rackcert.core.ssh_target import hop_options, node_known_hosts
from validation.bench.transport import (
    NODE_PATH,
    Job,
    LocalTransport,
    Node,
    SshTransport,
    Step,
    Transport,
    srun_label,
)

MARKER = (
    "RACKCERT_RESULT "  # validation.bench.node.worker.MARKER, without importing torch-side code
)
WORKER = ["-m", "validation.bench.node.worker"]
# Variables that steer NCCL/Gloo/torch and must reach remote ranks too.
FORWARD_ENV_PREFIXES = (
    "NCCL_",
    "GLOO_",
    "TORCH_",
    "TORCHINDUCTOR_",
    "NVSHMEM_",
    "CUDA_VISIBLE_DEVICES",
    "OMP_",
    "HOROVOD_",
)
# This machine's toolchain, as the operator's shell has it, for the engines started here
# (locally: the ranks themselves): the CUDA toolkit and its host compiler (CUDA_HOME,
# CUDAHOSTCXX), PyTorch's and Triton's own switches, the loader and compiler paths. Not
# secrets, and they steer what torch.compile builds and the key it caches it under: on an
# H200 a rank started without them missed every FX graph and AOTAutograd cache entry the
# same worker had written from the shell (and the reverse), so the certification run
# compiled for a minute where a user's run loaded in 13 s, and the two never shared a
# cache. Not sent to other nodes (their toolchain is theirs, not this machine's).
TOOLCHAIN_ENV_PREFIXES = ("CUDA", "PYTORCH_", "TRITON_")
TOOLCHAIN_ENV = ("LD_LIBRARY_PATH", "CC", "CXX", "CPATH", "LIBRARY_PATH")


class LaunchError(RackcertError):
    """A benchmark launch failed; the message names the launch, the exit code and the log."""


@dataclass
class Launch:
    """What to run for one measurement: its steps and the transport that runs them; `env`:
    what the processes started here get beside child_env's; `cwd`: where they start."""

    label: str
    steps: list[Step | Job]
    transport: Transport
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None

    @property
    def commands(self) -> list[list[str]]:
        """The command lines the transport starts here, in order (what the log shows)."""
        return [p.argv for p in self.transport.processes(self.steps)]


def on_nodes(label: str, steps: list[Step | Job], *, tty: bool = True) -> Launch:
    """Steps run on the nodes over SSH; tty (the launchers): `ssh -tt`, so that stopping
    the client stops the ranks (SshTransport)."""
    return Launch(label, steps, SshTransport(tty=tty))


def here(
    label: str, argvs: list[list[str]], env: dict[str, str] | None = None, cwd: str | None = None
) -> Launch:
    """Programs on this machine, one step each (the local engines)."""
    return Launch(label, [Step.here(a) for a in argvs], LocalTransport(), dict(env or {}), cwd)


def _forwarded_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(FORWARD_ENV_PREFIXES)}


def local_torchrun(nproc: int, worker_args: list[str], python: str = sys.executable) -> list[str]:
    """torchrun on this machine only: a standalone c10d rendezvous, one process per GPU."""
    return [
        python,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        str(nproc),
        *WORKER,
        *worker_args,
    ]


def horovodrun_binary(python: str = sys.executable) -> str:
    """The horovodrun script installed beside this interpreter (falls back to PATH)."""
    beside = Path(python).parent / "horovodrun"
    return str(beside) if beside.exists() else "horovodrun"


def local_horovodrun(nproc: int, worker_args: list[str], python: str = sys.executable) -> list[str]:
    """horovodrun with its Gloo controller on this machine."""
    return [
        horovodrun_binary(python),
        "--gloo",
        "-np",
        str(nproc),
        "-H",
        f"localhost:{nproc}",
        python,
        *WORKER,
        "--backend",
        "horovod",
        *worker_args,
    ]


def ssh_torchrun(
    nodes: list[Node],
    nproc_per_node: int,
    worker_args: list[str],
    *,
    remote_python: str,
    remote_dir: str | None,
    rdzv_port: int = 29400,
    rdzv_id: str | None = None,
    env: dict[str, str] | None = None,
    join_timeout_s: int = 300,
) -> Step:
    """torchrun on every node, all joining the c10d rendezvous on nodes[0]."""
    rdzv_id = rdzv_id or f"rackcert-{uuid.uuid4().hex[:12]}"
    extra = {**(env or {}), "PYTHONPATH": remote_dir} if remote_dir else dict(env or {})
    torchrun = [
        remote_python,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        str(len(nodes)),
        "--nproc-per-node",
        str(nproc_per_node),
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"{nodes[0].address}:{rdzv_port}",
        "--rdzv-id",
        rdzv_id,
        "--rdzv-conf",
        f"join_timeout={join_timeout_s}",
        "--max-restarts",
        "0",
        *WORKER,
        *worker_args,
    ]
    where = shlex.quote(remote_dir) if remote_dir else "/tmp"
    remote = f"cd {where} && exec {_node_env(extra)} {shlex.join(torchrun)}"
    return Step.on_all(nodes, remote, "rackcert-bench")


def node_vars(env: dict[str, str] | None = None) -> dict[str, str]:
    """The variables a rank on a node starts with, whichever transport reached it: the
    node's PATH, a UTF-8 locale, the engines' own variables from here
    (FORWARD_ENV_PREFIXES), then what the launch names; never this process's environment
    (secrets live there)."""
    return {"PATH": NODE_PATH, "LANG": "C.UTF-8", **_forwarded_env(), **(env or {})}


def env_pairs(named: dict[str, str]) -> str:
    """`K=V ...` for a shell line on a node: sorted, each value quoted."""
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(named.items()))


def _node_env(env: dict[str, str] | None) -> str:
    """`env -i K=V ...` for a command on a node over SSH: node_vars, and the node's own
    HOME (its ~/.ssh) and USER."""
    return f'env -i HOME="$HOME" USER="$USER" {env_pairs(node_vars(env))}'


def ssh_horovodrun(
    nodes: list[Node],
    nproc_per_node: int,
    worker_args: list[str],
    *,
    remote_python: str,
    interface: str | None = None,
    env: dict[str, str] | None = None,
    host_keys: list[str] | None = None,
) -> Step:
    """horovodrun started ON THE FIRST NODE (as the seed ran it), over the nodes' own SSH
    trust (configure's ssh_trust role): on node1, `horovodrun -np N -H a:g,b:g ...`.

    `--network-interface` is the spec's data interface: the nodes' names for it, which
    this machine does not share (the reason horovodrun from here found no common
    interface). Gloo is the controller (Horovod built without MPI); the collectives run
    on NCCL where Horovod was built with HOROVOD_GPU_OPERATIONS=NCCL and the ranks use
    GPUs, on Gloo otherwise. horovodrun's own hops to the other nodes run `ssh -o
    StrictHostKeyChecking=no` (hard-coded in Horovod 0.28, horovod/runner/util/remote.py),
    through a shell, so through PATH: the launch puts an ssh wrapper first on horovodrun's
    PATH (`ssh_wrapper`) that drops those options and pins `host_keys` (the controller's
    enrolled keys, shipped with the launch; without them the node's own known_hosts),
    StrictHostKeyChecking=yes. The ranks inherit horovodrun's environment, which `env -i`
    keeps to named variables.
    """
    first = nodes[0]
    horovodrun = str(Path(remote_python).parent / "horovodrun")
    argv = [
        horovodrun,
        "--gloo",
        "-np",
        str(len(nodes) * nproc_per_node),
        "-H",
        ",".join(f"{n.address}:{nproc_per_node}" for n in nodes),
        "-p",
        str(first.port),
        "--start-timeout",
        "120",
    ]
    if interface:
        argv += ["--network-interface", interface]
    argv += [remote_python, *WORKER, "--backend", "horovod", *worker_args]
    setup, known_hosts, cleanup = node_known_hosts(host_keys or [], "hvd")
    where = known_hosts.rsplit("/", 1)[0]
    pins = hop_options(known_hosts if host_keys is not None else None)
    wrapper = shlex.quote(ssh_wrapper(where, pins))
    setup += f" && printf %s {wrapper} > {where}/ssh && chmod 700 {where}/ssh"
    named = {**(env or {}), "PATH": f"{where}:{NODE_PATH}"}
    # No exec: the shell stays to remove the wrapper's directory when horovodrun ends.
    staying = _staying_shell(setup, cleanup, _node_env(named), argv)
    return Step.on_all([first], staying, "rackcert-bench")


# Options a launcher's ssh must not get from the launcher itself: the wrapper's pins decide.
_DROPPED = ("stricthostkeychecking", "userknownhostsfile", "globalknownhostsfile", "updatehostkeys")


def ssh_wrapper(where: str, pins: list[str]) -> str:
    """A POSIX sh `ssh` for a launcher that hard-codes its own host-key options (Horovod).

    It drops every `-o` host-key option of its argv (`-o X=..`, `-oX=..`, any case) up to a
    `--`, then runs the real ssh (PATH without `where`) with `pins` first: OpenSSH keeps the
    first value of an option, so even an option it missed could not loosen the pins.
    """
    drop = "|".join(f"{name}*" for name in _DROPPED)
    return f"""#!/bin/sh
# rackcert: ssh for horovodrun's hops, pinned to the rack's enrolled host keys.
PATH=${{PATH#{where}:}}
o= done=
for a do
  shift
  if [ -z "$done" ]; then
    if [ -n "$o" ]; then
      o=
      case "$(printf %s "$a" | tr '[:upper:]' '[:lower:]')" in {drop}) continue ;; esac
      set -- "$@" -o "$a"; continue
    fi
    case "$a" in
      --) done=1 ;;
      -o) o=1; continue ;;
      -o*)
        case "$(printf %s "${{a#-o}}" | tr '[:upper:]' '[:lower:]')" in {drop}) continue ;; esac ;;
    esac
  fi
  set -- "$@" "$a"
done
exec ssh {shlex.join(pins)} "$@"
"""


def ssh_mpirun(
    nodes: list[Node],
    nproc_per_node: int,
    worker_args: list[str],
    *,
    remote_python: str,
    backend: str = "torch",
    interface: str | None = None,
    known_hosts: str | None = None,
    rdzv_port: int = 29400,
    env: dict[str, str] | None = None,
    host_keys: list[str] | None = None,
) -> Step:
    """Open MPI's mpirun (Debian's openmpi-bin) started on the first node: the second
    launcher. Its ssh hops take `plm_rsh_args`, so they are strict (rackcert.core.ssh_target's
    hop options): `host_keys`, the controller's enrolled keys shipped with the launch into
    a private file on the first node, else `known_hosts` there (the file configure's
    ssh_trust role fills), StrictHostKeyChecking=yes. Ranks get only the variables named
    with `-x`. The torch backend reads its rank from Open MPI's OMPI_COMM_WORLD_*
    variables and meets at the first node (MASTER_ADDR/PORT); the horovod backend needs
    a Horovod built with MPI."""
    first = nodes[0]
    setup, shipped, cleanup = node_known_hosts(host_keys or [], "mpi")
    rsh = " ".join(["-p", str(first.port), *hop_options(shipped if host_keys else known_hosts)])
    named = {**_forwarded_env(), **(env or {})}
    if backend == "torch":
        named |= {"MASTER_ADDR": first.address, "MASTER_PORT": str(rdzv_port)}
    argv = ["mpirun", "--allow-run-as-root", "-np", str(len(nodes) * nproc_per_node), "-H",
            ",".join(f"{n.address}:{nproc_per_node}" for n in nodes), "--bind-to", "none",
            "--map-by", "slot", "--mca", "plm_rsh_args", rsh]  # fmt: skip
    if interface:
        argv += ["--mca", "btl_tcp_if_include", interface, "--mca", "oob_tcp_if_include",
                 interface]  # fmt: skip
    for key in sorted(named):
        argv += ["-x", f"{key}={named[key]}"]
    argv += [remote_python, *WORKER, "--backend", backend, *worker_args]
    remote = f"cd /tmp && exec {_node_env(env)} {shlex.join(argv)}"
    if host_keys:  # the shell stays to remove the shipped file when mpirun ends
        remote = _staying_shell(setup, cleanup, _node_env(env), argv)
    return Step.on_all([first], remote, "rackcert-bench")


def _staying_shell(setup: str, cleanup: str, env_prefix: str, argv: list[str]) -> str:
    """`setup`, then the launcher under a shell that stays (no exec) to run `cleanup` when
    it ends, also when the ssh client is stopped (HUP from the -tt pty) or the launch is
    interrupted: what the launch shipped to the first node never outlives it."""
    return (
        f"trap '{cleanup}' EXIT; trap 'exit 129' HUP INT TERM; {setup} && cd /tmp &&"
        f" {env_prefix} {shlex.join(argv)}"
    )


def parse_result(text: str) -> dict[str, Any] | None:
    """Rank 0's result from a launch's output (lines may carry an engine's rank prefix).

    A launcher may cut the long result line into pieces, each under the rank's prefix:
    Slurm 22.05's srun --label was seen forwarding a task's line in 1024-byte pieces, each
    on a line of its own ("0: <piece>"), other tasks' lines possibly between them. The
    pieces that follow under the same prefix are joined back until the JSON is whole.
    """
    lines = text.splitlines()
    for index in range(len(lines) - 1, -1, -1):
        at = lines[index].find(MARKER)
        if at < 0:
            continue
        prefix, body = lines[index][:at], lines[index][at + len(MARKER) :]
        for following in [None, *lines[index + 1 :]]:
            if following is not None:
                if prefix and srun_label(following) and not following.startswith(prefix):
                    continue  # another task's line between the pieces
                if not prefix or not following.startswith(prefix):
                    break
                body += following[len(prefix) :]
            try:
                return dict(json.loads(body))
            except ValueError:
                continue
        return dict(json.loads(body))  # not whole: the parser's own error says where
    return None


_EXC_RE = re.compile(r"\b([A-Za-z_][\w.]*(?:Error|Exception|Interrupt)): (.+)$")


# Exceptions the engines raise to say that a rank failed; the rank's own error says why.
_ENGINE_SUMMARIES = ("ChildFailedError", "Horovod detected that one or more processes exited")


# OpenSSH's words when a host's key is not the pinned one (sshconnect.c): changed, or unknown.
_HOST_KEY_RE = re.compile(
    r"Host key for (\S+) has changed|No \S+ host key is known for (\S+) and you have requested"
)


def _host_key_error(text: str) -> str | None:
    """A hop refused for its host key, said as such: a launcher's own summary ("could not
    connect to some hosts via ssh") does not say why."""
    if "Host key verification failed" not in text:
        return None
    found = _HOST_KEY_RE.search(text)
    who = next((g for g in found.groups() if g), "a node") if found else "a node"
    return (
        f"the host key of {who} is not the one enrolled (Host key verification failed);"
        " find out why before re-enrolling it (docs/security.md)"
    )


def _last_error_line(text: str) -> str:
    """The line that says why: a refused host key, else the last Python exception a rank
    printed, else the last line naming an error (torchrun's own "worker FAILED" summary
    names no cause)."""
    host_key = _host_key_error(text)
    if host_key:
        return host_key
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        match = _EXC_RE.search(ln)
        if match and not any(w in ln for w in _ENGINE_SUMMARIES):
            return f"{match.group(1)}: {match.group(2)}"[:300]
    for ln in reversed(lines):
        if any(w in ln for w in ("Error", "error:", "FAILED", "denied", "refused")):
            return ln[:300]
    return lines[-1][:300] if lines else "no output"


def execute_text(launch: Launch, log: Path, *, timeout_s: float = 1800) -> list[str]:
    """Run every command of the launch at once; return each command's output.

    All output goes to `log`. If one command fails, the others are stopped (they are
    this process's own children: ssh clients or the local engine). Raises LaunchError
    with the first failing command's exit code and its last error line.
    """
    texts, _wall, failed = _run(launch, log, timeout_s)
    if failed is not None:
        raise _failure(launch, log, texts, failed)
    return texts


def execute(launch: Launch, log: Path, *, timeout_s: float = 1800) -> list[dict[str, Any] | None]:
    """As execute_text, then each command's result line (or None); at least one must be.

    A launch that failed AFTER rank 0 printed its result is not a failed launch: that line
    exists only once every rank took part in the last gather of the figures, so the work
    is done and measured; what failed is a process's exit (a library's exit handler
    aborting, seen with Gloo). The result then carries `exit_warning`, which says so and
    names the ranks that never printed `RACKCERT_DONE` (their teardown did not finish).
    """
    texts, wall, failed = _run(launch, log, timeout_s)
    results = [parse_result(text) for text in texts]
    if all(r is None for r in results):
        if failed is not None:
            raise _failure(launch, log, texts, failed)
        raise LaunchError(f"bench launch {launch.label!r} ended without a result line; log: {log}")
    for r in results:
        if r is not None:
            r["wall_s"] = wall
            if failed is not None:
                r["exit_warning"] = exit_warning(texts, failed, r.get("world_size"))
    return results


_DONE_RE = re.compile(r"RACKCERT_DONE (\d+)")
_RANK_RE = re.compile(r"^\s*rank\s*:\s*(\d+)", re.MULTILINE)
_EXIT_RE = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)", re.MULTILINE)
_SIGNAL_RE = re.compile(r"Signal \d+ \((SIG\w+)\)")


def exit_warning(texts: list[str], failed: tuple[int, int], world_size: int | None) -> str:
    """One line for a launch whose ranks all reported but whose processes did not all exit
    cleanly: which ranks did not finish their teardown, and how the launcher saw the end
    (torchrun's "exitcode : -6 ... Signal 6 (SIGABRT)")."""
    index, code = failed
    text = "\n".join(texts)
    done = {int(m) for m in _DONE_RE.findall(text)}
    missing = sorted(set(range(world_size)) - done) if world_size else []
    who = f"rank(s) {', '.join(map(str, missing))}" if missing else "a process"
    how = "did not exit before the launch's timeout" if code == 124 and index == -1 else ""
    if not how:
        ranks, exits = _RANK_RE.findall(text), _EXIT_RE.findall(text)
        sigs = _SIGNAL_RE.findall(text)
        how = f"exit {exits[-1]}" if exits else f"exit {code}"
        how += f" ({sigs[-1]})" if sigs else ""
        who = f"rank {ranks[-1]}" if ranks and not missing else who
    return (
        f"every rank reported its figures, then {who} {how} at exit; the figures stand"
        f" (teardown finished on ranks {sorted(done) or 'none'})"
    )


def _failure(launch: Launch, log: Path, texts: list[str], failed: tuple[int, int]) -> LaunchError:
    index, code = failed
    why = "timed out" if code == 124 and index == -1 else f"exit {code}"
    text = texts[index] if index >= 0 else texts[0]
    return LaunchError(
        f"bench launch {launch.label!r} failed ({why}): {_last_error_line(text)}; log: {log}"
    )


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a launcher child gets: rackcert.core.childenv's named variables (never this
    process's whole environment, which may hold RACKCERT_VCENTER_PASSWORD, a become password
    or a token), this machine's toolchain (TOOLCHAIN_ENV), the engines' own variables
    (NCCL_, GLOO_, ...), then what the launch adds."""
    from rackcert.core.childenv import child_env as named

    keep = {
        k: v
        for k, v in os.environ.items()
        if k in TOOLCHAIN_ENV or k.startswith(TOOLCHAIN_ENV_PREFIXES)
    }
    return named({**keep, **_forwarded_env(), **(extra or {})})


def _run(
    launch: Launch, log: Path, timeout_s: float
) -> tuple[list[str], float, tuple[int, int] | None]:
    """Run the launch's steps through its transport (fail-fast: a rank that failed stops
    the others); (each process's output, wall seconds, (index, exit code) of the first
    that failed or (-1, 124) on timeout, else None), all written to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    answers = launch.transport.run(
        launch.steps,
        timeout_s,
        fail_fast=True,
        merge_stderr=True,
        env=child_env(launch.env),
        cwd=launch.cwd,
    )
    argvs = [argv for a in answers for argv in a.argvs]
    ran = [r for a in answers for r in a.ran]
    texts = [r.out for r in ran]
    with open(log, "w") as handle:
        for argv, text in zip(argvs, texts, strict=True):
            handle.write(f"$ {shlex.join(argv)}\n{text}\n")
    failed = next(((i, r.rc) for i, r in enumerate(ran) if r.rc and not r.stopped), None)
    if failed is None and any(r.stopped for r in ran):
        failed = (-1, 124)
    return texts, max((r.wall_s for r in ran), default=0.0), failed


def first_result(results: list[dict[str, Any] | None]) -> dict[str, Any]:
    """Rank 0's result among a launch's per-command results (the one that printed it)."""
    return next(r for r in results if r is not None)
