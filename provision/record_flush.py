"""Write the provision record as the run goes, so a killed controller loses nothing recorded.

Why: a rack's provision runs for the better part of an hour, and the controller can be
stopped at any moment (a service manager's stop, a CI job cancelled, an operator's kill).
The record must then say how far each host and VM got, so a person can tell, and a re-run
does only what is left. Writing the whole record after every action did that, but under
apply's lock: every lane waited for the disk at every step, and a host's state between two
actions (preparing, rebooting) was never written.

So one thread writes the record at most every `every` seconds (0.5) after a change, and it
is written at the end, on a fault, and on SIGTERM, after which the process ends with status
143 (128 + 15, the shell's convention for a death by SIGTERM) without unwinding threads that
wait on vCenter. SIGKILL cannot be caught: the record is then at most `every` seconds old.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

TERM_EXIT = 143
TERMINATED = (
    "provision stopped by SIGTERM; what was done is recorded: re-run provision to finish the rest"
)

Write = Callable[[str, "str | None", Any], Any]
"""The stage's writer: write(status, error, data) -> the record written."""


class RecordFlusher:
    """Writes `data` through `write` when it changed, at most every `every` seconds.

    `lock` is the record's lock: whoever changes `data` holds it (apply's `record_lock`),
    so a write never reads a half-made change. `changed()` is apply's `on_done`.
    """

    def __init__(self, data: Any, write: Write, every: float = 0.5) -> None:
        self.data = data
        self.write = write
        self.every = every
        self.lock = threading.RLock()
        self.writing = threading.RLock()  # one write at a time, the last one wins
        self.dirty = threading.Event()
        self.stopped = threading.Event()
        self.finished = False
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="rackcert-record", daemon=True)

    def changed(self, _data: Any = None) -> None:
        """Something in the record changed: it is written within `every` seconds."""
        self.dirty.set()

    def flush(self, status: str = "partial", error: str | None = None) -> Any:
        """Write the record now; returns what the writer returns."""
        with self.writing:
            self.dirty.clear()
            with self.lock:
                snapshot = self.data.model_dump(mode="json")
            return self.write(status, error, snapshot)

    def final(self, status: str, error: str | None = None) -> Any:
        """The last write: the thread is stopped first, so nothing older replaces it."""
        self.stop()
        self.finished = True
        return self.flush(status, error)

    def stop(self) -> None:
        self.stopped.set()
        self.dirty.set()
        if self.thread.is_alive() and threading.current_thread() is not self.thread:
            self.thread.join(timeout=30)

    def _run(self) -> None:
        while not self.stopped.is_set():
            self.dirty.wait()
            if self.stopped.is_set():
                return
            try:
                self.flush()
            except Exception as exc:  # noqa: BLE001 - the final write raises it to the caller
                self.error = exc
            self.stopped.wait(self.every)

    def terminated(self, _signum: int, _frame: Any) -> None:
        """SIGTERM: write what was done, say so on one line, end with 143."""
        self.stopped.set()
        try:
            self.flush("failed", TERMINATED)
            sys.stderr.write(f"error: {TERMINATED}\n")
            sys.stderr.flush()
        finally:
            os._exit(TERM_EXIT)


@contextlib.contextmanager
def flushing(data: Any, write: Write, every: float = 0.5) -> Iterator[RecordFlusher]:
    """While the block runs, `data` is written as it changes and on SIGTERM (handled where
    this runs in the main thread; elsewhere signals are not Python's to catch). A block that
    ends by an exception before `final` records it as the run's failure."""
    flusher = RecordFlusher(data, write, every)
    previous: Any = None
    main = threading.current_thread() is threading.main_thread()
    if main:
        previous = signal.signal(signal.SIGTERM, flusher.terminated)
    flusher.thread.start()
    flusher.changed()  # the plan, before the first step: a record from the start
    try:
        yield flusher
    except BaseException as exc:
        if not flusher.finished:
            with contextlib.suppress(Exception):  # the exception itself says more
                flusher.final("failed", f"provision stopped: {exc or type(exc).__name__}")
        raise
    finally:
        flusher.stop()
        if main:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
