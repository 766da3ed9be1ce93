"""Where a configure run's time goes: its slowest tasks, with each host's share.

ansible-runner keeps every event of a run in the run directory
(`<run>/artifacts/configure/ansible/<ident>/job_events/*.json`); a host's result
event (`runner_on_ok`, `_failed`, `_skipped`, `_unreachable`) carries the
task's `duration` on that host. Under the linear strategy a task ends when its
slowest host ends, so the table also shows the task's wall span: from its
`playbook_on_task_start` to the next task's (the controller's own templating
and include processing counted in). Tasks of included files that run more than
once (vendor_package, once per vendor role) are summed under one name, with
the number of times they ran.

    .venv/bin/python benchmarks/configure_profile.py RUN_DIR [RUN_DIR ...]
    .venv/bin/python benchmarks/configure_profile.py RUN_DIR --top 25 --roles

RUN_DIR is a run directory (`runs/<rack>/<timestamp>`) or any folder above one
or more `job_events` folders (a test's tmp_path); each ansible run is profiled
on its own, in the order it started.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

RESULTS = {"runner_on_ok", "runner_on_failed", "runner_on_skipped", "runner_on_unreachable"}


@dataclass
class Task:
    """One task name (role : task) of a run: its wall span and each host's time in it."""

    name: str
    wall: float = 0.0
    runs: int = 0
    hosts: dict[str, float] = field(default_factory=lambda: defaultdict(float))


def _when(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["created"]).timestamp()


def _name(data: dict[str, Any]) -> str:
    role = data.get("role") or ""
    task = data.get("task") or data.get("name") or "?"
    return f"{role} : {task}" if role else task


def load_events(job_events: Path) -> list[dict[str, Any]]:
    """The run's events in the order ansible-runner counted them."""
    events = []
    for path in job_events.glob("*.json"):
        try:
            events.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return sorted(events, key=lambda e: e.get("counter", 0))


def profile(events: list[dict[str, Any]]) -> tuple[dict[str, Task], float]:
    """Tasks by name, and the run's wall time (first event to last)."""
    tasks: dict[str, Task] = {}
    starts: list[tuple[float, str]] = []
    for ev in events:
        data = ev.get("event_data", {})
        if ev.get("event") in ("playbook_on_task_start", "playbook_on_handler_task_start"):
            name = _name(data)
            tasks.setdefault(name, Task(name)).runs += 1
            starts.append((_when(ev), name))
        elif ev.get("event") in RESULTS and data.get("host"):
            name = _name(data)
            task = tasks.setdefault(name, Task(name))
            task.hosts[data["host"]] += float(data.get("duration") or 0.0)
    end = max((_when(e) for e in events), default=0.0)
    for (t0, name), (t1, _) in zip(starts, [*starts[1:], (end, "")], strict=True):
        tasks[name].wall += t1 - t0
    total = end - _when(events[0]) if events else 0.0
    return tasks, total


def _role(name: str) -> str:
    return name.split(" : ", 1)[0] if " : " in name else "(play)"


def table(tasks: dict[str, Task], total: float, top: int, roles: bool) -> str:
    """The slowest `top` tasks (by wall span), then optionally the time per role."""
    hosts = sorted({h for t in tasks.values() for h in t.hosts})
    head = f"{'wall s':>7} {'x':>3} " + " ".join(f"{h[:9]:>9}" for h in hosts) + "  task"
    lines = [f"run wall time {total:.1f} s, {len(tasks)} distinct tasks", head]
    for t in sorted(tasks.values(), key=lambda t: -t.wall)[:top]:
        per = " ".join(f"{t.hosts.get(h, 0.0):9.1f}" for h in hosts)
        lines.append(f"{t.wall:7.1f} {t.runs:3d} {per}  {t.name[:90]}")
    if roles:
        by_role: dict[str, float] = defaultdict(float)
        for t in tasks.values():
            by_role[_role(t.name)] += t.wall
        lines.append("wall s per role")
        for role, wall in sorted(by_role.items(), key=lambda kv: -kv[1]):
            lines.append(f"{wall:7.1f}  {role}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print one table per ansible run found under the given folders."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--top", type=int, default=20, help="rows per table (default 20)")
    ap.add_argument("--roles", action="store_true", help="also print the wall time per role")
    args = ap.parse_args(argv)
    found = [d for p in args.paths for d in sorted(p.rglob("job_events")) if d.is_dir()]
    if not found:
        print(f"configure_profile: no job_events folder under {', '.join(map(str, args.paths))}")
        return 2
    runs = [(d, load_events(d)) for d in found]
    for d, events in sorted(runs, key=lambda r: r[1][0]["created"] if r[1] else ""):
        tasks, total = profile(events)
        print(f"== {d.parent}")
        print(table(tasks, total, args.top, args.roles))
    return 0


if __name__ == "__main__":
    sys.exit(main())
