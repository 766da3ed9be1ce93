"""Bench ranks as a Slurm job: one `srun` from this machine, Slurm places the ranks.

This module builds the job (its shape and what each task runs); the srun command line
is validation.bench.transport's (SrunTransport, `job_argv`).

Why srun and not SSH: on a site that schedules with Slurm, jobs never start by SSH from a
controller; certifying the rack the way its users run it means asking Slurm for nodes
(`--nodes N --ntasks-per-node G --exclusive`, one GPU per task, `--mpi=pmix`) and
letting it choose. The ranks take their identity from Slurm's task environment
(SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID: validation.bench.node.comm) and meet at the first
node of the step (MASTER_ADDR from `scontrol show hostnames $SLURM_STEP_NODELIST`).

Bounded, never a hang: `--immediate=S` (srun(1): "exit if resources are not available
within the time period specified") gives up on a job Slurm cannot place in S seconds: too
few idle nodes, a drained node, a partition or reservation that does not fit; Slurm's own
refusal (an unknown partition, more nodes than exist) comes at once. Either is one line.

Each task first prints `rackcert-slurm job=<id> node=<name> rank=<n>`, so the record can
name the job ids and the nodes Slurm chose (`placement`).

Nothing of this process's environment reaches the ranks (`--export=NONE`): the task's
shell sets the named variables only, as the SSH launchers' `env -i` does.

Horovod runs the same way, as DeepOps runs it: `srun --mpi=pmix` starts every rank and
Horovod (built with MPI against Debian's Open MPI) meets the others through MPI_Init and
the step's PMIx server. `--mpi=pmi2` is no choice with Debian's Open MPI: it was "not built
with SLURM's PMI support".
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from validation.bench.launch import WORKER, Launch, env_pairs, node_vars
from validation.bench.transport import NODE_PATH, Job, SrunTarget, SrunTransport

TAG = "rackcert-slurm"
_TAG_RE = re.compile(rf"{TAG} job=(\d+) node=(\S+) rank=(\d+)")


def horovod_env(interface: str | None) -> dict[str, str]:
    """What a Horovod rank under `srun --mpi=pmix` needs beside Slurm's own variables.

    Horovod's MPI controller and MPI operations (HOROVOD_CONTROLLER, HOROVOD_CPU_OPERATIONS
    are read at hvd.init(), horovod/common/utils/env_parser.cc), the way DeepOps runs
    Horovod under Slurm; GPU tensors still go through NCCL where Horovod was built with it.
    Open MPI 4 refuses to run as root unless both OMPI_ALLOW_RUN_AS_ROOT variables are set
    (mpirun's --allow-run-as-root does it there; a direct launch has no mpirun), and keeps
    its TCP traffic on the data interface through the MCA variables mpirun's --mca sets.
    """
    env = {
        "HOROVOD_CONTROLLER": "mpi",
        "HOROVOD_CPU_OPERATIONS": "mpi",
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    }
    if interface:
        env |= {"OMPI_MCA_btl_tcp_if_include": interface, "OMPI_MCA_oob_tcp_if_include": interface}
    return env


def rank_script(
    python: str,
    worker_args: list[str],
    *,
    rdzv_port: int,
    env: dict[str, str] | None = None,
    backend: str = "torch",
) -> str:
    """What each task runs: say where it is, find the step's first node, start the worker.

    torch.distributed ranks start from an empty environment plus the named variables
    (`env -i`). Horovod ranks keep the task's own environment: Open MPI's MPI_Init finds
    the step's PMIx server through the PMIX_* variables slurmstepd sets (a direct launch,
    srun(1) --mpi=pmix), and srun's --export=NONE already kept this machine's out of it.
    """
    # Slurm binds each task's GPU (--gpus-per-task 1) through the task's own
    # CUDA_VISIBLE_DEVICES: that one goes on, never this machine's.
    named = node_vars({"PYTHONUNBUFFERED": "1", **(env or {})})
    named.pop("CUDA_VISIBLE_DEVICES", None)
    pairs = env_pairs(named)
    worker = shlex.join([python, *WORKER, "--backend", backend, *worker_args])
    empty = "-i " if backend == "torch" else ""
    return (
        f"export PATH={NODE_PATH}; "
        f'echo "{TAG} job=$SLURM_JOB_ID node=$SLURMD_NODENAME rank=$SLURM_PROCID" >&2; '
        'first=$(scontrol show hostnames "$SLURM_STEP_NODELIST" | head -n 1); '
        '[ -n "$first" ] || { echo "error: no first node in $SLURM_STEP_NODELIST" >&2; exit 2; }; '
        f'cd /tmp && exec env {empty}HOME="${{HOME:-/tmp}}" {pairs}'
        f" MASTER_ADDR=$first MASTER_PORT={rdzv_port}"
        " RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID"
        ' ${CUDA_VISIBLE_DEVICES+"CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"}'
        f" SLURM_JOB_ID=$SLURM_JOB_ID {worker}"
    )


def build(
    label: str,
    *,
    nodes: int,
    tasks_per_node: int,
    gpus: bool,
    python: str,
    worker_args: list[str],
    partition: str | None,
    reservation: str | None,
    immediate_s: int,
    client_conf: str | None,
    rdzv_port: int = 29400,
    env: dict[str, str] | None = None,
    backend: str = "torch",
    interface: str | None = None,
) -> Launch:
    """The Launch that runs one measurement as one Slurm job step (torch.distributed or
    Horovod ranks; Horovod needs a build with MPI, see horovod_env)."""
    if backend == "horovod":
        env = {**horovod_env(interface), **(env or {})}
    script = rank_script(python, worker_args, rdzv_port=rdzv_port, env=env, backend=backend)
    job = Job(nodes, tasks_per_node, script, gpus=gpus, name="rackcert-bench")
    target = SrunTarget(
        partition=partition,
        reservation=reservation,
        immediate_s=immediate_s,
        client_conf=client_conf,
    )
    # srun runs with a Slurm client's environment, the client configuration in it
    # (SrunTarget.env): nothing of the launch's own reaches it or the tasks.
    return Launch(label, [job], SrunTransport(target))


def placement(text: str) -> dict[str, Any]:
    """The job ids and the nodes Slurm chose, from the tasks' own lines in the output."""
    jobs: set[int] = set()
    ranks: dict[int, str] = {}
    for match in _TAG_RE.finditer(text):
        jobs.add(int(match.group(1)))
        ranks[int(match.group(3))] = match.group(2)
    nodes: list[str] = []
    for rank in sorted(ranks):
        if ranks[rank] not in nodes:
            nodes.append(ranks[rank])
    return {"job_ids": sorted(jobs), "nodes": nodes, "ranks": len(ranks)}
