"""A step carries its argv, srun's output has one reader, srun's environment one recipe.

- A program step here is its argv, never a shell line split back (a quote or a `$` in an
  argument reaches the program as it was); the line is rendered only where a shell reads it
  (ssh, an srun task).
- srun --label's prefix is read by validation.bench.transport.srun_label alone, padded task
  numbers included (srun pads them once a step has ten tasks or more).
- srun's own environment is a Slurm client's (rackcert.core.slurm.client_env) whoever runs
  the step: a launch's environment for local and SSH processes does not replace it.
"""

from __future__ import annotations

import json

from rackcert.core.slurm.client import client_env
from rackcert.core.ssh_target import SshTarget
from validation.bench.launch import MARKER, parse_result
from validation.bench.transport import (
    Job,
    LocalTransport,
    Node,
    SrunTarget,
    SrunTransport,
    SshTransport,
    Step,
    node_lines,
    srun_label,
    task_lines,
)

A = Node("a", SshTarget(host="10.0.0.1"))
B = Node("b", SshTarget(host="10.0.0.2"))
ARGV = ["/opt/py", "-c", "print('a b')", "$HOME", ""]


def test_a_program_step_carries_its_argv_and_a_shell_sees_it_quoted() -> None:
    step = Step.here(ARGV)
    assert step.commands == (tuple(ARGV),)
    (here,) = LocalTransport().procs(step, barrier=False)
    assert here.argv == ARGV  # as given: the empty argument too
    (far,) = SshTransport().procs(Step((A,), (tuple(ARGV),)), barrier=False)
    assert far.argv[-1] == "/opt/py -c 'print('\"'\"'a b'\"'\"')' '$HOME' ''"
    (srun,) = SrunTransport(SrunTarget()).procs(Step((A, B), (tuple(ARGV), "true")), False)
    assert "a) /opt/py -c " in srun.argv[-1] and "b) true;;" in srun.argv[-1]


def test_srun_labels_are_read_in_one_place_padded_ones_too() -> None:
    assert srun_label("0: READY") == ("0", "READY")
    assert srun_label(" 7: x") == ("7", "x")
    assert srun_label("12: y") == ("12", "y")
    assert srun_label("srun: error: node2: task 1: Killed") is None
    text = " 1: rackcert-node b\n 0: rackcert-node a\n 1: two\n10: ten\n"
    assert node_lines(text) == {"b": ["two"], "a": []}
    assert task_lines(text) == {"1": "rackcert-node b\ntwo", "0": "rackcert-node a", "10": "ten"}
    # A padded task's long result line, cut in pieces with another task's line between.
    line = MARKER + json.dumps({"points": list(range(400))})
    pieces = [line[i : i + 1024] for i in range(0, len(line), 1024)]
    between = f" 3: {pieces[0]}\n 4: other\n" + "".join(f" 3: {p}\n" for p in pieces[1:])
    assert parse_result(between) == {"points": list(range(400))}


def test_srun_keeps_a_slurm_clients_environment_whatever_the_launch_gives() -> None:
    target = SrunTarget(client_conf="/etc/slurm/site.conf")
    transport = SrunTransport(target)
    job = Job(1, 1, "true")
    (proc,) = transport.procs(job, barrier=False)
    assert proc.env == target.env() == client_env("/etc/slurm/site.conf")
    (local,) = LocalTransport().procs(Step.here(["/bin/true"]), barrier=False)
    assert local.env is None  # the launch's (child_env) is given to it at run
