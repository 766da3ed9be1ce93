"""upgrade.json as the roll goes: one writer, a lock, an atomic rewrite after every change.

Why write-ahead: a step is recorded `started` before the port touches the world and
`done` after, so a controller killed in between leaves a record that says exactly which
step may be half done; a re-run repeats that step (every step is idempotent: draining a
drained node, entering maintenance a host is in, a reboot proven by a later bootTime).
The file goes through the spine's atomic write (temporary file, fsync, rename): SIGKILL
leaves the old record or the new one, never half of one. It is written compact (C JSON
encoder) and without re-reading meta.json or re-validating the typed record each time:
it is rewritten after every transition and grows with the rack (16 hosts x 2 VMs: the
indented write cost ~10 ms a time, scaled into every wave of the roll).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from rackcert.core.runs import RunDir, atomic_write_json, utc_now
from rackcert.core.stage_records import (
    UpgradeData,
    UpgradeHost,
    UpgradeNode,
    UpgradeRecord,
    UpgradeStep,
)

FINISHED_STEPS = ("done", "skipped")


class Recorder:
    """The roll's record, shared by the threads of one wave."""

    def __init__(self, run: RunDir, data: UpgradeData):
        self.run = run
        self.data = data
        self.lock = threading.RLock()
        self._nodes = {n.name: n for n in data.nodes}
        self._hosts = {h.name: h for h in data.hosts}
        meta = run.meta
        self._rack = str(meta["rack"])
        self._sha = run.spec_sha256 or str(meta["spec_sha256"])
        earlier = run.read_stage("upgrade")  # a resumed roll keeps its start
        started = earlier.get("started_at") if isinstance(earlier, dict) else None
        self._started = started if isinstance(started, str) else utc_now()

    def node(self, name: str) -> UpgradeNode:
        return self._nodes[name]

    def host(self, name: str) -> UpgradeHost:
        return self._hosts[name]

    def save(self) -> None:
        with self.lock:
            status = "ok" if self.data.status == "done" and not self.data.failures else "partial"
            if self.data.status == "stopped":
                status = "failed"
            record = UpgradeRecord(
                rack=self._rack,
                spec_sha256=self._sha,
                status=status,  # type: ignore[arg-type]
                error=self.data.stopped_because or None,
                started_at=self._started,
                finished_at=utc_now(),
                data=self.data,
            )
            atomic_write_json(
                self.run.path / "upgrade.json", record.model_dump(mode="json"), indent=None
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
