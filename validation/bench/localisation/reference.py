"""The per-node stage with a reference: the same probe on the controller, at the same barrier.

Why: a roll holds a node to its own before (rackcert.upgrade.judge), measured minutes
earlier. Where the node's CPUs are one machine's shared with others (the lab: nodes are
network namespaces on the controller's machine, 2 cores under a load of 20), its CPU
figures are that machine's share at the moment, not the node's: one node's copy rate read
0.64 and 1.06 GB/s in one roll. The controller runs the same probe at the same barrier as
the node, so both read the same moment; where both report one boot_id (proc(5): the same
running kernel, so the same CPUs) the ratio node/reference is the node's own and the roll
compares ratios (colocated.py is the same reasoning for the rack's median); which
readings shared a machine is decided by rackcert.upgrade.evidence.reference_figures. A
rack's node never shares the controller's boot_id, nor does a GPU unit carry one: there the
reference is kept out of the figures and nothing changes.

    rows, reference = node_stage_referenced(nodes, opts, log)
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

from validation.bench.localisation.stages import (
    LocaliseOptions,
    node_rows,
    probe_command,
    transport_of,
)
from validation.bench.transport import (
    HERE,
    Answer,
    LocalTransport,
    Node,
    Step,
    run_processes,
    write_log,
)

REFERENCE = "reference"  # the controller's row's name in the log and the rows


def node_stage_referenced(
    nodes: list[Node], opts: LocaliseOptions, log: Path | None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The probe on every node and on this machine (this interpreter), all timed loops
    starting at one barrier: (the nodes' rows, the reference's row, `error` set if it failed)."""
    remote, local = transport_of(opts), LocalTransport()
    step = Step.on_all(nodes, probe_command(opts), "rackcert-localise-nodes")
    here = Step.here(shlex.split(probe_command(opts, sys.executable)), "rackcert-localise-ref")
    procs, mine = remote.procs(step, True), local.procs(here, True)
    # the reference runs for the nodes: where every node's probe failed (a refused host
    # key, an unreachable node), it is stopped rather than measured for nothing
    ran = run_processes([*procs, *mine], opts.timeout_s, barrier=True,
                        served=range(len(procs)))  # fmt: skip
    ans, ref = remote.answer(step, ran[: len(procs)]), local.answer(here, ran[len(procs) :])
    ans.argvs, ans.ran = [p.argv for p in procs], ran[: len(procs)]
    ref.argvs, ref.ran = [p.argv for p in mine], ran[len(procs) :]
    write_log(log, f"{remote.name} node stage, {local.name} reference", [ans, ref])
    (row,) = node_rows([Node(REFERENCE, HERE.ssh)], _as(ref, HERE.name, REFERENCE))
    return node_rows(nodes, ans), row


def _as(ans: Answer, name: str, new: str) -> Answer:
    """The answer with the local node's output under the reference's name."""
    ans.outputs = {new: ans.outputs.get(name, "")}
    ans.errors = {new: ans.errors.get(name, "")}
    return ans
