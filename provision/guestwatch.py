"""One watch over every VM provision waits for: power state and Tools' address, pushed by vCenter.

Why: each VM's boot wait read its VM's power state and guest address at every poll, two
round trips per VM per poll: 256 VMs polled every 50 ms were thousands of reads a second,
which loaded vCenter and this controller more than the work did. vCenter pushes changes
instead: one PropertyCollector filter over a ListView of the VMs being waited for, with one
WaitForUpdatesEx call outstanding (vSphere Web Services SDK Programming Guide, "Property
Collector": a ListView holds a set of objects that changes over time, ModifyListView adds
to it, and WaitForUpdatesEx reports each object entering the view and each change since).
Each waiter is woken when its VM changes. SSH probes stay with each waiter: they go to the
guest, not to vCenter. If the watch fails (a dropped connection, a session renewed under
it), the waiters read their VM themselves again, as before.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from provision.viewspec import view_filter_spec

PATHS = ["runtime.powerState", "guest.ipAddress"]


class GuestWatch:
    """The last seen PATHS of every VM followed, kept current by one WaitForUpdatesEx loop."""

    def __init__(self, si: Any, wait_s: float = 1.0) -> None:
        from pyVmomi import vim

        content = si.content
        self.si = si
        self.wait_s = wait_s
        self.view = content.viewManager.CreateListView(obj=[])
        self.collector = content.propertyCollector.CreatePropertyCollector()
        self.collector.CreateFilter(
            view_filter_spec(self.view, {vim.VirtualMachine: PATHS}), partialUpdates=False
        )
        self.cond = threading.Condition()
        self.seen: dict[str, dict[str, Any]] = {}  # moid -> PATHS values and a change count
        self.failed: BaseException | None = None
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="rackcert-guests", daemon=True)

    def follow(self, vm: Any) -> bool:
        """Add `vm` to the view; False when the watch cannot (the waiter reads it itself)."""
        if self.failed is not None:
            return False
        try:
            self.view.ModifyListView(add=[vm])
        except Exception:  # noqa: BLE001 - the waiter falls back to its own reads
            return False
        return True

    def look(self, moid: str, since: int, timeout: float) -> dict[str, Any] | None:
        """The VM's PATHS once its change count passes `since` (or after `timeout` s);
        None when the watch has not seen the VM or has failed."""
        with self.cond:
            self.cond.wait_for(
                lambda: self.failed is not None or self.seen.get(moid, {}).get("n", -1) > since,
                timeout,
            )
            if self.failed is not None or moid not in self.seen:
                return None
            return dict(self.seen[moid])

    def _run(self) -> None:
        from pyVmomi import vmodl

        options = vmodl.query.PropertyCollector.WaitOptions(maxWaitSeconds=max(1, int(self.wait_s)))
        version = ""
        while not self.stopped.is_set():
            try:
                update = self.collector.WaitForUpdatesEx(version, options)
            except Exception as exc:  # noqa: BLE001 - the waiters read for themselves then
                with self.cond:
                    self.failed = exc
                    self.cond.notify_all()
                return
            if update is None:
                continue
            version = update.version
            with self.cond:
                for filter_set in update.filterSet or []:
                    for obj in filter_set.objectSet or []:
                        entry = self.seen.setdefault(obj.obj._moId, {"n": 0})
                        for change in obj.changeSet or []:
                            entry[change.name] = None if change.op == "remove" else change.val
                        entry["n"] += 1
                self.cond.notify_all()

    def close(self) -> None:
        """Stop the watch now. CancelWaitForUpdates (vSphere API reference, PropertyCollector)
        ends the pending WaitForUpdatesEx with RequestCanceled, so apply does not sit out the
        rest of its round (up to wait_s) after the last VM answered. The call goes on its own
        connection from pyVmomi's pool, beside the one the wait holds, and is repeated until
        the loop has ended (cancel_waits)."""
        self.stopped.set()
        cancel_waits(lambda: self.collector if self.thread.is_alive() else None, self.wait_s + 30)
        with contextlib.suppress(Exception):  # best effort: the session's logout ends them too
            self.collector.DestroyPropertyCollector()
        with contextlib.suppress(Exception):
            self.view.DestroyView()


def cancel_waits(collector: Callable[[], Any], timeout: float) -> None:
    """CancelWaitForUpdates on `collector()` until it returns None (its watch has ended) or
    `timeout` s have passed. A cancel ends only a wait already outstanding (vSphere API
    reference, PropertyCollector.CancelWaitForUpdates): a watch loop that sends its next
    WaitForUpdatesEx just after a cancel would sit out that round, so it is cancelled again."""
    deadline = time.monotonic() + timeout
    while (pc := collector()) is not None and time.monotonic() < deadline:
        with contextlib.suppress(Exception):  # the wait may have ended, or the session
            pc.CancelWaitForUpdates()
        time.sleep(0.1)


# The watch of the running apply, if any (lifecycle.wait_up looks here).
ACTIVE: dict[str, GuestWatch | None] = {"watch": None}


@contextlib.contextmanager
def watching_guests(si: Any, wanted: bool) -> Iterator[GuestWatch | None]:
    """While the block runs, boot waits on this session follow one watch (when `wanted`:
    the plan waits for guests; a watch that cannot start leaves each wait to poll)."""
    watch: GuestWatch | None = None
    if wanted:
        try:
            watch = GuestWatch(si)
        except Exception:  # noqa: BLE001 - the waits poll as before
            watch = None
    if watch is not None:
        watch.thread.start()
        ACTIVE["watch"] = watch
    try:
        yield watch
    finally:
        if watch is not None:
            ACTIVE["watch"] = None
            watch.close()
