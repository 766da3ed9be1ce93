"""validation.bench.transport: one way to run steps on nodes (here: the local transport,
/bin/sh on this machine; the SSH and srun transports are the localisation lab tests')."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.support.bench_transport import A, B
from validation.bench.stdin_control import StdinControl
from validation.bench.transport import (
    Job,
    LocalTransport,
    Proc,
    SrunTarget,
    SrunTransport,
    SshTransport,
    Step,
    run_processes,
)


def test_a_step_answers_each_nodes_output_and_the_first_failure() -> None:
    step = Step.pair(A, B, "echo from-a", "echo from-b >&2; exit 3")
    (ans,) = LocalTransport().run([step], timeout_s=10)
    assert ans.output("a") == "from-a\n" and ans.output("b") == ""
    assert ans.rc == 3 and ans.why("b") == "from-b"
    assert ans.why("a") == "from-a"  # no error text: its last output line


def test_an_empty_command_starts_nothing_on_that_node() -> None:
    (ans,) = LocalTransport().run([Step.pair(A, B, "echo x", "")], timeout_s=10)
    assert set(ans.outputs) == {"a"} and ans.rc == 0


def test_the_barrier_releases_every_process_at_one_instant(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # b is slow to get ready; a must not start measuring before b said READY
    line = "sleep {d}; echo READY; read go; date +%s.%N"
    step = Step.pair(A, B, line.format(d=0), line.format(d=1))
    t0 = time.time()
    (ans,) = LocalTransport().run([step], timeout_s=20, barrier=True, log=tmp_path / "log")
    ta, tb = (float(ans.output(n).strip()) for n in ("a", "b"))
    assert ta - t0 >= 0.9 and abs(ta - tb) < 0.5, (ta - t0, tb - t0)
    assert "READY" not in ans.output("a")  # the barrier's line is not the answer
    assert "== local #0 rc=0" in (tmp_path / "log").read_text()


def test_a_deadline_stops_the_step_and_says_so() -> None:
    t0 = time.monotonic()
    (ans,) = LocalTransport().run([Step.on_all([A], "sleep 30")], timeout_s=1)
    assert time.monotonic() - t0 < 15
    assert ans.rc == 124 and "timed out after 1 s" in ans.why("a")


def test_fail_fast_stops_the_others_and_names_the_first_failure() -> None:
    ran = run_processes(
        [Proc(["/bin/sh", "-c", "sleep 30"]), Proc(["/bin/sh", "-c", "exit 7"])],
        20,
        fail_fast=True,
    )
    assert ran[1].rc == 7 and not ran[1].stopped
    assert ran[0].stopped and ran[0].wall_s < 15


def test_a_job_is_srun_s_alone_and_a_program_here_starts_without_a_shell() -> None:
    """The bench's Slurm job (nodes Slurm chooses) has one command line, SrunTransport's;
    the other transports refuse it. A program step here is its own argv (bench.json's
    `commands` name the engine, not a shell)."""
    job = Job(2, 4, "run-rank", gpus=True)
    target = SrunTarget(partition="gpu", immediate_s=30, client_conf="/etc/slurm/site.conf")
    (proc,) = SrunTransport(target).procs(job, barrier=False)
    assert proc.argv[:2] == ["srun", "--mpi=pmix"] and proc.argv[-3:] == [
        "/bin/sh",
        "-c",
        "run-rank",
    ]
    assert "--nodes=2" in proc.argv and "--gpus-per-task=1" in proc.argv
    assert proc.env is not None and proc.env["SLURM_CONF"] == "/etc/slurm/site.conf"
    for other in (LocalTransport(), SshTransport()):
        with pytest.raises(TypeError, match="chosen by Slurm"):
            other.procs(job, barrier=False)
    (here,) = LocalTransport().procs(Step.here(["/bin/echo", "a b", "$HOME"]), barrier=False)
    assert here.argv == ["/bin/echo", "a b", "$HOME"]
    (ans,) = LocalTransport().run([Step.here(["/bin/echo", "a b", "$HOME"])], timeout_s=10)
    assert ans.output("localhost") == "a b $HOME\n" and ans.argvs == [here.argv]
    (tty,) = SshTransport(tty=True).procs(Step.on_all([A], "true"), barrier=False)
    assert tty.argv[:2] == ["ssh", "-tt"] and tty.argv[-1] == "true"


def test_a_control_reaches_its_own_step_and_reads_its_answer() -> None:
    # the "loop" answers PAUSE with PAUSED and ends on STOP; the other step's stdin has
    # ended at its start (cat returns at once), as every step's does without a control
    loop = 'while read l; do [ "$l" = PAUSE ] && echo PAUSED; [ "$l" = STOP ] && exit 0; done'
    control = StdinControl("loop")
    done: list[Any] = []
    steps = [Step.on_all([A], loop, "loop"), Step.on_all([B], "cat; echo other-ended", "other")]
    worker = threading.Thread(
        target=lambda: done.extend(LocalTransport().run(steps, 20, control=control))
    )
    worker.start()
    assert control.started.wait(10)
    assert control.ask("PAUSE", "PAUSED", timeout_s=10)
    assert control.ask("PAUSE", "PAUSED", timeout_s=10)  # a second answer, not the first again
    assert control.tell("STOP")
    worker.join(20)
    loop_ans, other = done
    assert loop_ans.rc == 0 and loop_ans.output("a").split() == ["PAUSED", "PAUSED"]
    assert other.output("b").strip() == "other-ended"
    assert not control.tell("PAUSE")  # the step is over: nothing takes the line


def test_a_control_whose_step_does_not_answer_says_so_in_time() -> None:
    control = StdinControl("deaf")
    worker = threading.Thread(
        target=lambda: LocalTransport().run(
            [Step.on_all([A], "sleep 3", "deaf")], 20, control=control
        )  # fmt: skip
    )
    worker.start()
    assert control.started.wait(10)
    t0 = time.monotonic()
    assert not control.ask("PAUSE", "PAUSED", timeout_s=0.5)
    assert time.monotonic() - t0 < 2.5
    worker.join(20)


def test_processes_that_serve_others_stop_once_all_those_failed() -> None:
    t0 = time.monotonic()
    ran = run_processes(
        [Proc(["/bin/sh", "-c", "exit 3"]), Proc(["/bin/sh", "-c", "exit 255"]),
         Proc(["/bin/sh", "-c", "sleep 30"])],
        20,
        served=[0, 1],
    )  # fmt: skip
    assert time.monotonic() - t0 < 15
    assert [r.rc for r in ran[:2]] == [3, 255] and ran[2].stopped


def test_processes_that_serve_others_run_on_while_one_of_those_succeeded() -> None:
    ran = run_processes(
        [Proc(["/bin/sh", "-c", "exit 3"]), Proc(["/bin/sh", "-c", "exit 0"]),
         Proc(["/bin/sh", "-c", "sleep 1; echo measured"])],
        20,
        served=[0, 1],
    )  # fmt: skip
    assert ran[2].rc == 0 and ran[2].out.strip() == "measured" and not ran[2].stopped
