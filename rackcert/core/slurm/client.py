"""Slurm's clients (scontrol, squeue, sinfo) and the reading of what they print: one module.

Why one place: the health check, localisation's drain, the rolling upgrade and the lab all
ask Slurm the same questions (a node's state and reason, its jobs; drain, resume) and must
read the answers the same way: two readings of `State=` or `Reason=` that differ would let
one caller take an operator's drain for its own, or miss its own. They often run from a
program Slurm started with no PATH of its own (HealthCheckProgram, a prolog). Each call gets
the same short environment (the client configuration only when one is named: a site's
password variables never reach Slurm's tools), the same search path and a timeout. srun is a
Slurm client too: the launch transport (validation.bench.transport) starts it with
`client_env`, the same environment.

What Slurm says, read as Slurm documents it (scontrol(1), sinfo(1) NODE STATE CODES):
`scontrol show node -o` prints `State=<BASE>[+FLAG...]` with a `*` after a base state the
controller cannot reach; a node with the DRAIN flag and jobs left (ALLOCATED, MIXED,
COMPLETING) is DRAINING, one with none is DRAINED. `Reason=<text> [<user>@<time>]` (Slurm
appends the user and time to the reason it stores), and other fields may follow on the line
(`Comment=...`).

    node = show_node("n1", conf="/etc/slurm/slurm.conf")
    node.drain, node.reason
    drain("n1", "rackcert: gpu.count: 3", conf="/etc/slurm/slurm.conf")
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from rackcert.core.errors import RackcertError

# Where Slurm's clients live when the caller gives no PATH: a site's own build first.
SLURM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TIMEOUT_S = 15.0
BUSY = ("ALLOCATED", "MIXED", "COMPLETING")


class SlurmError(RackcertError):
    """A Slurm client could not run, timed out or refused: one line, `<tool> <args>: why`."""


def client_env(conf: str | None = None) -> dict[str, str]:
    """The environment a Slurm client runs with: the search path, a C locale, the conf."""
    env = {"PATH": SLURM_PATH, "LANG": "C.UTF-8"}
    if conf:
        env["SLURM_CONF"] = conf
    return env


def run_client(
    tool: str, *args: str, conf: str | None = None, timeout: float = TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """Run a Slurm client; its exit status and output are the caller's to judge. Raises
    OSError when it cannot start and subprocess.TimeoutExpired past `timeout`."""
    binary = shutil.which(tool, path=SLURM_PATH) or tool
    return subprocess.run(
        [binary, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=client_env(conf),
    )


def scontrol(
    *args: str, conf: str | None = None, timeout: float = TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """scontrol with these arguments (run_client): for what no function below asks."""
    return run_client("scontrol", *args, conf=conf, timeout=timeout)


def _checked(tool: str, *args: str, conf: str | None, timeout: float) -> str:
    """The client's stdout; SlurmError naming the call when it cannot run or exits non-zero."""
    what = f"{tool} {' '.join(args[:3])}"
    try:
        proc = run_client(tool, *args, conf=conf, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SlurmError(f"{what}: {exc}") from None
    if proc.returncode != 0:
        err = " ".join((proc.stderr or proc.stdout).split())
        raise SlurmError(f"{what}: {err or f'exit {proc.returncode}'}")
    return proc.stdout


# -- reading --------------------------------------------------------------------------------
# The reason is the text before the first ` [user@time]` stamp that the line's end or the next
# `Key=` field follows: a reason may itself hold brackets with an @ (its text comes from
# findings that quote the node), and a field after it (an operator's Comment) may too.
REASON = re.compile(r"\bReason=(.*?) \[[^\]\[@]*@[^\]\[]*\](?=[ \t]*$|\s+[A-Za-z_]+=)", re.M)
_FIELD = re.compile(r"(?:^|\s)(NodeName|State|Partitions)=(\S*)")


def node_reason(line: str) -> str:
    """The reason on one node's line (or a single node's output); empty when none is set.

    node_reason("NodeName=n1 State=IDLE+DRAIN Reason=disk swap [ops@2026-12-03T15:00:00]")
    # -> "disk swap"
    """
    found = REASON.search(line)
    return found.group(1).strip() if found else ""


@dataclass(frozen=True)
class SlurmNode:
    """One node as `scontrol show node -o` prints it.

    `state` is the State= field as printed; `base` Slurm's base state in upper case (IDLE,
    MIXED, ALLOCATED, COMPLETING, DOWN, UNKNOWN; DRAINED/DRAINING folded into IDLE/MIXED
    with `drain`; an IDLE node the controller cannot reach is DOWN); `drain` the DRAIN flag;
    `busy` whether it holds a job; `reason` who drained it and why (empty when nobody did).
    """

    name: str
    state: str = ""
    base: str = "UNKNOWN"
    drain: bool = False
    busy: bool = False
    reason: str = ""
    partitions: tuple[str, ...] = ()


def parse_node(line: str) -> SlurmNode | None:
    """One line of `scontrol show node -o`; None when it names no node."""
    fields = dict(_FIELD.findall(line))
    name = fields.get("NodeName")
    if not name:
        return None
    state = fields.get("State", "UNKNOWN")
    parts = state.split("+")
    base = parts[0].rstrip("*~#!%$@^-").upper() or "UNKNOWN"
    flags = {p.rstrip("*").upper() for p in parts[1:]}
    if parts[0].endswith("*") and base not in ("DOWN",):
        flags.add("NOT_RESPONDING")
    drain = bool(flags & {"DRAIN", "DRAINING", "DRAINED"}) or base in ("DRAINED", "DRAINING")
    if base in ("DRAINED", "DRAINING"):
        base = "MIXED" if base == "DRAINING" else "IDLE"
    return SlurmNode(
        name=name,
        state=state,
        base="DOWN" if "NOT_RESPONDING" in flags and base == "IDLE" else base,
        drain=drain,
        busy=base in BUSY or "COMPLETING" in flags,
        reason=node_reason(line),
        partitions=tuple(p for p in fields.get("Partitions", "").split(",") if p),
    )


def parse_nodes(text: str) -> dict[str, SlurmNode]:
    """`scontrol show node -o` (one line per node), by node name."""
    out: dict[str, SlurmNode] = {}
    for line in text.splitlines():
        node = parse_node(line)
        if node is not None:
            out[node.name] = node
    return out


def parse_short_states(text: str) -> dict[str, str]:
    """`sinfo -N -h -o "%N %t"`: each node's short state (idle, alloc, drain, down*...)."""
    return dict(line.split()[:2] for line in text.splitlines() if len(line.split()) >= 2)


# -- asking ---------------------------------------------------------------------------------
def show_nodes(*, conf: str | None = None, timeout: float = TIMEOUT_S) -> dict[str, SlurmNode]:
    """Every node slurmctld knows, read at once (`scontrol show node -o`)."""
    return parse_nodes(_checked("scontrol", "show", "node", "-o", conf=conf, timeout=timeout))


def show_node(node: str, *, conf: str | None = None, timeout: float = TIMEOUT_S) -> SlurmNode:
    """One node as slurmctld has it (`scontrol show node NODE -o`)."""
    text = _checked("scontrol", "show", "node", node, "-o", conf=conf, timeout=timeout)
    return parse_node(text) or SlurmNode(node)


def jobs_on(node: str, *, conf: str | None = None, timeout: float = TIMEOUT_S) -> int:
    """Jobs running or completing on the node (`squeue -w`)."""
    text = _checked(
        "squeue", "-h", "-w", node, "-t", "RUNNING,COMPLETING", "-o", "%i", conf=conf,
        timeout=timeout,
    )  # fmt: skip
    return len([line for line in text.splitlines() if line.strip()])


def drain(node: str, reason: str, *, conf: str | None = None, timeout: float = TIMEOUT_S) -> None:
    """Drain the node with `reason` (or set a drained node's reason): `scontrol update`."""
    _checked(
        "scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}", conf=conf,
        timeout=timeout,
    )  # fmt: skip


def resume(node: str, *, conf: str | None = None, timeout: float = TIMEOUT_S) -> None:
    """Put the node back into service: `scontrol update ... state=resume`."""
    _checked("scontrol", "update", f"nodename={node}", "state=resume", conf=conf, timeout=timeout)


def short_states(*, conf: str | None = None, timeout: float = TIMEOUT_S) -> dict[str, str]:
    """Each node's state as sinfo prints it (idle, alloc, drain, down*...)."""
    text = run_client("sinfo", "-N", "-h", "-o", "%N %t", conf=conf, timeout=timeout).stdout
    return parse_short_states(text)
