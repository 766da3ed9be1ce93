"""Loops in background threads whose failures reach the test: re-raised in the main thread.

Why: an exception in a `threading.Thread` ends that thread and is printed at most; the
test that started it goes on and passes. The lab roll's job stream caught AssertionError
from sbatch and let anything else end the thread, so an sbatch that timed out
(subprocess.TimeoutExpired) silently stopped the jobs the roll was meant to run under, and
the test still passed. `Background` runs each loop in a thread of its own, keeps the first
exception each one raises, and raises it in the main thread when the block ends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType


class Background:
    """`with Background(loop, ...) as bg:` runs each `loop(bg.stop)` in its own thread until
    the block ends (bg.stop is set); then every thread is joined, and the first exception
    any of them raised is raised here. If the block itself raised, that exception goes on
    and the threads' failures are added to it as notes."""

    def __init__(self, *loops: Callable[[threading.Event], None], join_s: float = 30.0):
        self.stop = threading.Event()
        self.join_s = join_s
        self.failures: list[tuple[str, BaseException]] = []
        self._lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self._run, args=(loop,), name=loop.__name__, daemon=True)
            for loop in loops
        ]

    def _run(self, loop: Callable[[threading.Event], None]) -> None:
        try:
            loop(self.stop)
        except BaseException as exc:  # noqa: BLE001 - kept for the main thread, raised there
            with self._lock:
                self.failures.append((threading.current_thread().name, exc))
            self.stop.set()  # one loop failed: the others stop too, the test ends sooner

    def __enter__(self) -> Background:
        for t in self.threads:
            t.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(self.join_s)
        stuck = [t.name for t in self.threads if t.is_alive()]
        notes = [f"background loop {name} raised {e!r}" for name, e in self.failures]
        notes += [f"background loop {name} did not stop in {self.join_s:g} s" for name in stuck]
        if exc is not None:
            for note in notes:
                exc.add_note(note)
            return
        if self.failures:
            name, first = self.failures[0]
            first.add_note(f"raised in background loop {name}")
            raise first
        if stuck:
            raise RuntimeError("; ".join(notes))
