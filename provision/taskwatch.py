"""One reader for every vCenter task in flight: the state of all of them in one call.

Why: with hosts and VMs in parallel, dozens of tasks run at once, and a thread per task
reading its own `info` every moment costs a round trip per task per poll: vCenter's load
and this controller's CPU grow with the rack. While apply runs, `wait_task`
(provision/vsphere_ops.py) hands its task to this watcher instead: one thread reads
`info.state`, `info.progress`, `info.result` and `info.error` of every pending task in one
PropertyCollector retrieval per interval, and wakes each waiter when its task ends.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

PATHS = ["info.state", "info.progress", "info.result", "info.error"]


@dataclass
class _Pending:
    task: Any
    done: threading.Event = field(default_factory=threading.Event)
    info: dict[str, Any] = field(default_factory=dict)


class TaskWatcher:
    """Reads all pending tasks' info in one retrieval every `interval` seconds."""

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
        with self.lock:
            self.pending[task._moId] = entry
        self.wake.set()
        return entry

    def forget(self, task: Any) -> None:
        with self.lock:
            self.pending.pop(task._moId, None)

    def run(self) -> None:
        delay = min(0.05, self.interval)
        while not self.stopped.is_set():
            with self.lock:
                entries = list(self.pending.values())
            if not entries:
                self.wake.wait(1.0)
                self.wake.clear()
                delay = min(0.05, self.interval)
                continue
            try:
                self.read(entries)
            except Exception as exc:  # noqa: BLE001 - each waiter reads its own task then
                self.error = exc
                for entry in entries:
                    entry.done.set()
            self.stopped.wait(delay)
            delay = min(delay * 2, self.interval)

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
            entry.info = {p.name: p.val for p in obj.propSet}
            if str(entry.info.get("info.state")) in ("success", "error"):
                self.forget(entry.task)
                entry.done.set()
            elif entry.info.get("info.progress") is not None:
                entry.done.set()  # progress to report: the waiter reads and waits again


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
