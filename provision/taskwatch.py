"""One reader for every vCenter task in flight: the state of all of them in one call.

Why: with hosts and VMs in parallel, dozens of tasks run at once, and a thread per task
reading its own `info` every moment costs a round trip per task per poll: vCenter's load
and this controller's CPU grow with the rack. While apply runs, `wait_task`
(provision/vsphere_ops.py) hands its task to this watcher instead: one thread reads
`info.state`, `info.progress`, `info.result` and `info.error` of every pending task in one
PropertyCollector retrieval, and wakes each waiter when its task ends.

How often: each task is looked at after about a twentieth of its age so far (at least a
200th of the watcher's interval, 10 ms at the default 2 s; at most the interval). A task of
30 s is then seen ending within ~1.5 s, one of 9 minutes within the interval, and one that
ends at once (a ReconfigVM_Task of a powered-off VM, or any task on a twin whose clock is
shrunk) within a few milliseconds, while the round trips per task grow only with the log of
its length. A fixed interval made
short tasks wait for the poll, not for vCenter: on a shrunk clock the polls were the figure.

The shortest pause is a share of the interval, not a fixed 10 ms: the interval shrinks with
a twin's clock (provision.pace.Pace.poll_s), and a fixed floor made every short task's first
looks come every 10 wall ms whatever the scale, so the looks (and this controller's CPU,
which the pace benchmark counts scaled up) grew with the wall time: 404 reads for 16 hosts
x 2 VMs at scale 0.01, 1,734 for the same work at 0.05. ROUND_TRIP_S stays the floor of
the floor: no look sooner than a round trip takes.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

PATHS = ["info.state", "info.progress", "info.result", "info.error"]
LEAST_SHARE = 200  # the shortest pause before a look is 1/LEAST_SHARE of the interval
ROUND_TRIP_S = 0.002  # and never under a round trip's order
SHARE = 20  # a task is looked at after 1/SHARE of its age so far


def next_look(age: float, most: float) -> float:
    """Seconds until the next look at a task that has run `age` seconds (see the module).

    >>> next_look(0.0, 2.0), next_look(10.0, 2.0), next_look(600.0, 2.0)
    (0.01, 0.5, 2.0)
    >>> next_look(0.0, 4.0), next_look(0.0, 0.1)  # a twin's clock at 0.2, at 0.005
    (0.02, 0.002)
    """
    return min(most, max(ROUND_TRIP_S, most / LEAST_SHARE, age / SHARE))


@dataclass
class _Pending:
    task: Any
    done: threading.Event = field(default_factory=threading.Event)
    info: dict[str, Any] = field(default_factory=dict)
    since: float = field(default_factory=time.monotonic)
    due: float = 0.0


class TaskWatcher:
    """Reads the info of every pending task that is due in one retrieval; `interval` is the
    longest pause between two looks at one task."""

    def __init__(self, si: Any, interval: float) -> None:
        self.si = si
        self.interval = interval
        self.lock = threading.Lock()
        self.pending: dict[str, _Pending] = {}
        self.wake = threading.Event()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, name="rackcert-tasks", daemon=True)
        self.error: BaseException | None = None

    def watch(self, task: Any) -> _Pending:
        entry = _Pending(task)
        entry.due = entry.since + next_look(0.0, self.interval)
        with self.lock:
            self.pending[task._moId] = entry
        self.wake.set()
        return entry

    def forget(self, task: Any) -> None:
        with self.lock:
            self.pending.pop(task._moId, None)

    def run(self) -> None:
        while not self.stopped.is_set():
            self.wake.clear()  # before the listing: a task watched after it wakes the wait
            with self.lock:
                entries = list(self.pending.values())
            now = time.monotonic()
            due = [e for e in entries if e.due <= now]
            if not due:
                pause = min((e.due for e in entries), default=now + 1.0) - now
                self.wake.wait(pause)
                continue
            try:
                self.read(due)
            except Exception as exc:  # noqa: BLE001 - each waiter reads its own task then
                self.error = exc
                for entry in entries:
                    entry.done.set()
                self.stopped.wait(self.interval)
                continue
            now = time.monotonic()
            for entry in due:
                entry.due = now + next_look(now - entry.since, self.interval)

    def read(self, entries: list[_Pending]) -> None:
        from pyVmomi import vim, vmodl

        pc = vmodl.query.PropertyCollector
        spec = pc.FilterSpec(
            objectSet=[pc.ObjectSpec(obj=e.task, skip=False) for e in entries],
            propSet=[pc.PropertySpec(type=vim.Task, pathSet=PATHS)],
        )
        found = self.si.content.propertyCollector.RetrieveContents([spec]) or []
        by_moid = {e.task._moId: e for e in entries}
        for obj in found:
            entry = by_moid.get(obj.obj._moId)
            if entry is None:
                continue
            before = entry.info.get("info.progress")
            entry.info = {p.name: p.val for p in obj.propSet}
            if str(entry.info.get("info.state")) in ("success", "error"):
                self.forget(entry.task)
                entry.done.set()
            elif entry.info.get("info.progress") not in (None, before):
                entry.done.set()  # new progress to report: the waiter reads and waits again


# The watcher of the running apply, if any (wait_task looks here).
ACTIVE: dict[str, TaskWatcher | None] = {"watcher": None}


@contextlib.contextmanager
def watching(si: Any, interval: float) -> Iterator[TaskWatcher]:
    """While the block runs, wait_task on this session's tasks goes through one watcher."""
    watcher = TaskWatcher(si, interval)
    watcher.thread.start()
    ACTIVE["watcher"] = watcher
    try:
        yield watcher
    finally:
        ACTIVE["watcher"] = None
        watcher.stopped.set()
        watcher.wake.set()
        watcher.thread.join(timeout=10)
