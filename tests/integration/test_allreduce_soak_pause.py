"""validation.bench.node.allreduce_soak told to yield: two real Gloo ranks on loopback,
rank 0 told PAUSE and RESUME on its stdin through the transport's control channel, as the
burn-in's pair rounds tell the rack loop."""

from __future__ import annotations

import json
import shlex
import socket
import sys
import threading
import time
from typing import Any

import pytest

from tests.support.bench_transport import A, B
from validation.bench.burnin.stage import SOAK_SOURCE
from validation.bench.stdin_control import StdinControl
from validation.bench.transport import LocalTransport, Step

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rank_line(rank: int, port: int) -> str:
    return shlex.join(
        [sys.executable, "-c", SOAK_SOURCE.read_text(), "--rank", str(rank), "--world", "2",
         "--master", "127.0.0.1", "--port", str(port), "--size-bytes", str(256 << 20),
         "--cpu-size-bytes", "65536",
         "--duration", "8", "--interval", "0.3", "--device", "cpu", "--ifname", "lo",
         "--control"]
    )  # fmt: skip


def test_the_loop_pauses_when_told_and_records_when() -> None:
    port = free_port()
    control = StdinControl("soak")
    step = Step((A, B), (rank_line(0, port), rank_line(1, port)), "soak")
    done: list[Any] = []
    run = LocalTransport().run
    worker = threading.Thread(target=lambda: done.extend(run([step], 90, control=control)))
    worker.start()
    assert control.ask("PAUSE", "PAUSED", timeout_s=60)
    asked = time.time()
    time.sleep(1.5)
    resumed = time.time()
    assert control.tell("RESUME")
    worker.join(90)
    (ans,) = done
    assert ans.rc == 0, ans.why()
    rec = json.loads(ans.output("a").strip().splitlines()[-1])
    # CPU ranks move the CPU size, not the GPU one the spec's template would give them
    assert rec["correct"] and rec["backend"] == "gloo" and rec["size_bytes"] == 65536, rec
    (span,) = rec["paused"]
    assert span[0] <= asked and resumed <= span[1] + 0.5, (span, asked, resumed)
    # no interval started while paused; the loop ran again after it
    assert not [s for s in rec["starts"] if span[0] < s < span[1]], rec["starts"]
    assert any(s >= span[1] for s in rec["starts"]), rec["starts"]
    assert ans.output("b").count("PAUSED") == 0  # rank 0 alone answers
