"""upgrade.json as the roll goes: one writer, a lock, an atomic rewrite after every change.

Why write-ahead: a step is recorded `started` before the port touches the world and
`done` after, so a controller killed in between leaves a record that says exactly which
step may be half done; a re-run repeats that step (every step is idempotent: draining a
drained node, entering maintenance a host is in, a reboot proven by a later bootTime).
RunDir.write_stage writes through a temporary file, fsync and rename: SIGKILL leaves the
old record or the new one, never half of one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from rackcert.core.runs import RunDir, utc_now
from rackcert.core.stage_records import UpgradeData, UpgradeHost, UpgradeNode, UpgradeStep

FINISHED_STEPS = ("done", "skipped")


class Recorder:
    """The roll's record, shared by the threads of one wave."""

    def __init__(self, run: RunDir, data: UpgradeData):
        self.run = run
        self.data = data
        self.lock = threading.RLock()
        self._nodes = {n.name: n for n in data.nodes}
        self._hosts = {h.name: h for h in data.hosts}

    def node(self, name: str) -> UpgradeNode:
        return self._nodes[name]

    def host(self, name: str) -> UpgradeHost:
        return self._hosts[name]

    def save(self) -> None:
        with self.lock:
            status = "ok" if self.data.status == "done" and not self.data.failures else "partial"
            if self.data.status == "stopped":
                status = "failed"
            self.run.write_stage(
                "upgrade", self.data, status=status, error=self.data.stopped_because or None
            )

    @contextmanager
    def editing(self) -> Iterator[UpgradeData]:
        """Change the record under the lock, then write it."""
        with self.lock:
            yield self.data
            self.save()

    def finished(self, target: UpgradeNode | UpgradeHost, step: str) -> UpgradeStep | None:
        for entry in target.steps:
            if entry.step == step and entry.status in FINISHED_STEPS:
                return entry
        return None

    def begin(self, target: UpgradeNode | UpgradeHost, step: str) -> UpgradeStep:
        """The step's entry, written `started` (a re-run reuses a started one)."""
        with self.lock:
            for entry in target.steps:
                if entry.step == step and entry.status == "started":
                    return entry
            entry = UpgradeStep(step=step, status="started", started_at=utc_now())
            target.steps.append(entry)
            self.save()
            return entry

    def end(self, entry: UpgradeStep, status: str, detail: str = "") -> None:
        with self.lock:
            entry.status = status  # type: ignore[assignment]
            entry.ended_at = utc_now()
            entry.detail = " ".join(detail.split())[:500]
            self.save()
