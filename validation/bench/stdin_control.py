"""Lines to a running step's processes on their stdin, and their answers read back.

Why: a load that runs for hours must sometimes make room. The burn-in's rack allreduce
keeps every ring link busy, so a link measured beside it reads the share the loop leaves
(seen in the lab: ring links at 0.59-0.66x of the others, named as bad cables). The loop
is told to yield while the pair rounds run, and says when it has, on the same channel the
barrier uses: the step's stdin, which ssh passes to the remote command and srun
broadcasts to every task (`--input=all`), and its output, which run_processes writes to a
file as it comes. The channel needs no port and no file on the node.

    control = StdinControl("rackcert-burnin-rack-ar")
    ... Transport.run(steps, ..., control=control) in a thread ...
    if control.ask("PAUSE", "PAUSED", timeout_s=30): measure(); control.tell("RESUME")
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

POLL_S = 0.05


class StdinControl:
    """The channel to one step (by its name) while Transport.run runs it."""

    def __init__(self, step_name: str) -> None:
        self.step_name = step_name
        self.started = threading.Event()  # the step's processes are running
        self._lock = threading.Lock()
        self._stdins: list[IO[bytes]] = []
        self._outs: list[Path] = []
        self._strip: Callable[[str], str] = str.strip
        self._closed = False

    def bind(self, stdins: Sequence[IO[bytes]], outs: Sequence[Path],
             strip: Callable[[str], str]) -> None:  # fmt: skip
        """Called by run_processes once the step's processes run (after any barrier)."""
        with self._lock:
            self._stdins, self._outs, self._strip = list(stdins), list(outs), strip
        self.started.set()

    def close(self) -> None:
        """End of input for the step (run_processes, when the processes are done)."""
        with self._lock:
            self._closed = True
            for f in self._stdins:
                with contextlib.suppress(OSError):
                    f.close()

    def tell(self, line: str) -> bool:
        """`line` to every process of the step; False where none could take it (ended)."""
        sent = False
        with self._lock:
            if self._closed:
                return False
            for f in self._stdins:
                try:
                    f.write(line.encode() + b"\n")
                    f.flush()
                    sent = True
                except (BrokenPipeError, OSError, ValueError):
                    continue
        return sent

    def said(self, line: str) -> int:
        """How many times the step's processes have printed `line` so far."""
        count = 0
        for out in self._outs:
            try:
                text = out.read_text(errors="replace")
            except OSError:
                continue
            count += sum(1 for ln in text.splitlines() if self._strip(ln) == line)
        return count

    def ask(self, line: str, answer: str, timeout_s: float) -> bool:
        """Send `line`; True once `answer` is printed once more than before, False when
        it is not within `timeout_s` (the step ended, or it did not hear). Waits for the
        step's start first, within the same time."""
        deadline = time.monotonic() + timeout_s
        if not self.started.wait(timeout_s):
            return False
        before = self.said(answer)
        if not self.tell(line):
            return False
        while time.monotonic() < deadline:
            if self.said(answer) > before:
                return True
            if self._closed:
                return False
            time.sleep(POLL_S)
        return False
