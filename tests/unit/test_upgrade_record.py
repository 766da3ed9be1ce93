"""The roll's record under a wave's threads: write-ahead, and one write for changes made at once."""

from __future__ import annotations

import json
import threading
import time

import pytest

from rackcert.upgrade.machine import new_record
from rackcert.upgrade.record import Recorder
from tests.support.upgrade_helpers import four_node, make_plan, new_run, spec_of, upgraded


def _recorder(tmp_path) -> Recorder:
    data = four_node(hosts=4, per_host=2)
    plan = make_plan(spec_of(data), spec_of(upgraded(data)))
    return Recorder(new_run(tmp_path, upgraded(data)), new_record(plan))


def _on_disk(rec: Recorder) -> dict:
    return json.loads((rec.run.path / "upgrade.json").read_text())["data"]


def test_threads_saving_at_once_share_one_write_and_each_change_is_on_disk_when_it_returns(
    tmp_path,
):
    rec = _recorder(tmp_path)
    names = [n.name for n in rec.data.nodes]
    seen: dict[str, list[str]] = {}

    def note(name: str) -> None:
        with rec.editing() as data:
            data.notes.append(name)
        # write-ahead: once save returned, the file holds this thread's change
        seen[name] = list(_on_disk(rec)["notes"])

    rec._writing.acquire()  # a write under way: every thread's save waits behind it
    threads = [threading.Thread(target=note, args=(n,)) for n in names]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10
    while rec._changes < len(names) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert rec._changes == len(names), "every thread changed the record before the disk freed"
    rec._writing.release()
    for t in threads:
        t.join(timeout=10)
    assert rec.writes == 1, f"{rec.writes} writes for {len(names)} changes made at once"
    assert sorted(_on_disk(rec)["notes"]) == sorted(names)
    for name, notes in seen.items():
        assert name in notes


def test_a_change_made_during_a_write_gets_a_write_of_its_own(tmp_path):
    rec = _recorder(tmp_path)
    rec.update(lambda data: bool(data.notes.append("first") or True))
    assert rec.writes == 1 and _on_disk(rec)["notes"] == ["first"]
    rec.update(lambda data: False)  # nothing changed: nothing written
    assert rec.writes == 1
    entry = rec.begin(rec.node(rec.data.nodes[0].name), "drain")
    assert rec.writes == 2 and _on_disk(rec)["nodes"][0]["steps"][0]["status"] == "started"
    rec.end(entry, "done", "drained")
    assert rec.writes == 3 and _on_disk(rec)["nodes"][0]["steps"][0]["status"] == "done"


def test_saving_under_the_records_lock_is_refused_not_a_deadlock(tmp_path):
    rec = _recorder(tmp_path)
    with rec.lock, pytest.raises(RuntimeError, match="under the record's lock"):
        rec.save()


def test_a_state_left_to_the_next_write_reaches_the_disk_with_it(tmp_path):
    rec = _recorder(tmp_path)
    node = rec.data.nodes[0].name

    def drain(_data) -> bool:
        rec.node(node).state = "draining"
        return True

    rec.update(drain, durable=False)
    assert rec.writes == 0
    rec.flush()
    assert rec.writes == 1 and _on_disk(rec)["nodes"][0]["state"] == "draining"
    rec.flush()  # nothing left: no write
    assert rec.writes == 1
