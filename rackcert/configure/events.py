"""Per-host results from ansible-runner events (never from parsing stdout).

Why a separate, pure module: the record (configure.json), the progress display
and the tests all need the same reading of the event stream. `EventCollector`
takes the event dicts ansible-runner hands to `event_handler`, one at a time, and
keeps per host: counts, the task it is on, the tasks that changed (what --check
says would change) and, for a failed or unreachable host, the task and message.
The final counts come from Ansible's own recap (`playbook_on_stats`) when the
run got that far, else from the events seen.
"""

from __future__ import annotations

from typing import Any, Literal

from rackcert.core.stage_records import ConfigureHost, TaskProblem

_MAX_MSG = 600
# A role reports what became of its component (installed, found, skipped and why) as a fact
# `<role>_outcome` holding a mapping with a "status" (the nccl_tests role does): the record
# keeps it per host, so a skip is said, not hidden in a count of skipped tasks.
OUTCOME_SUFFIX = "_outcome"


def host_status(h: ConfigureHost) -> Literal["ok", "changed", "failed", "unreachable"]:
    """One word: unreachable, failed, changed or ok."""
    if h.unreachable:
        return "unreachable"
    if h.failed:
        return "failed"
    return "changed" if h.changed else "ok"


def _take_outcomes(h: ConfigureHost, res: dict[str, Any]) -> None:
    facts = res.get("ansible_facts")
    if not isinstance(facts, dict):
        return
    for key, value in facts.items():
        if key.endswith(OUTCOME_SUFFIX) and isinstance(value, dict) and "status" in value:
            h.outcomes[key[: -len(OUTCOME_SUFFIX)]] = {
                str(k): (_clip(v) if isinstance(v, str) else v) for k, v in value.items()
            }


def _label(event_data: dict[str, Any]) -> str:
    task = event_data.get("task") or event_data.get("name") or "?"
    role = event_data.get("role") or ""
    return f"{role} : {task}" if role else str(task)


def task_message(res: dict[str, Any] | None) -> str:
    """The one line that says why a task failed: msg, plus the last stderr line if any."""
    res = res or {}
    if res.get("censored"):
        return str(res["censored"])
    items = res.get("results")
    if isinstance(items, list) and any(isinstance(r, dict) and r.get("failed") for r in items):
        inner = [
            f"{_item_label(r)}: {task_message(r)}"
            for r in items
            if isinstance(r, dict) and r.get("failed")
        ]
        return _clip("; ".join(inner))
    parts = [str(res.get("msg") or "").strip()]
    for key in ("stderr", "module_stderr", "stdout"):
        text = str(res.get(key) or "").strip()
        if text:
            last = text.splitlines()[-1].strip()
            if last and last not in parts[0]:
                parts.append(last)
            break
    return _clip(" | ".join(p for p in parts if p) or "failed (no message)")


def _item_label(res: dict[str, Any]) -> str:
    label = res.get("_ansible_item_label", res.get("item", "?"))
    return str(label)[:80]


def _clip(message: str) -> str:
    message = " ".join(message.split())
    return message if len(message) <= _MAX_MSG else message[: _MAX_MSG - 3] + "..."


class EventCollector:
    """Accumulates ansible-runner events into the record's per-host entries (`handle` is the
    event hook), so what the progress display shows is what configure.json keeps."""

    def __init__(self) -> None:
        self.hosts: dict[str, ConfigureHost] = {}
        self.current: dict[str, str] = {}  # the task each host is on (display only)
        self.tasks_started = 0
        self.current_task = ""
        self.play = ""
        self.stats_seen = False
        self.warnings: list[str] = []

    def host(self, name: str) -> ConfigureHost:
        if name not in self.hosts:
            self.hosts[name] = ConfigureHost(name=name)
        return self.hosts[name]

    def handle(self, event: dict[str, Any]) -> None:
        """Read one event (the dict ansible-runner passes to event_handler)."""
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        if kind == "playbook_on_play_start":
            self.play = str(data.get("play") or data.get("name") or "")
        elif kind == "playbook_on_task_start":
            self.tasks_started += 1
            self.current_task = _label(data)
        elif kind == "playbook_on_stats":
            self._stats(data)
        elif kind.startswith("runner_on_") and data.get("host"):
            self._host_event(kind, data)
            host = self.hosts.get(str(data["host"]))
            if host is not None:
                host.status = host_status(host)
        elif kind == "warning":
            self.warnings.append(str(event.get("stdout", "")).strip())

    def _host_event(self, kind: str, data: dict[str, Any]) -> None:
        h = self.host(str(data["host"]))
        label = _label(data)
        res = data.get("res") or {}
        if kind == "runner_on_start":
            self.current[h.name] = label
            return
        if kind in ("runner_on_ok", "runner_on_failed", "runner_on_skipped"):
            h.tasks_done += 1
        if kind == "runner_on_ok":
            h.ok += 1
            _take_outcomes(h, res)
            if res.get("changed"):
                h.changed += 1
                h.changed_tasks.append(label)
        elif kind == "runner_on_failed":
            if data.get("ignore_errors"):
                h.ignored += 1
            else:
                h.failed += 1
                h.failures.append(
                    TaskProblem(
                        task=str(data.get("task", "")),
                        role=str(data.get("role", "")),
                        message=task_message(res),
                    )
                )
        elif kind == "runner_on_skipped":
            h.skipped += 1
        elif kind == "runner_on_unreachable":
            h.unreachable = True
            if res.get("censored"):  # no_log hides the result, not the fact of the outage
                res = {"msg": "lost the connection during a no_log task (its output is hidden)"}
            h.failures.append(
                TaskProblem(
                    task=str(data.get("task", "")),
                    role=str(data.get("role", "")),
                    message="unreachable: " + task_message(res),
                )
            )

    def _stats(self, data: dict[str, Any]) -> None:
        """Ansible's recap is authoritative for the counts."""
        self.stats_seen = True
        names = set()
        for key in ("ok", "changed", "failures", "dark", "skipped", "rescued", "ignored"):
            names |= set((data.get(key) or {}).keys())
        for name in names:
            h = self.host(name)
            h.ok = int((data.get("ok") or {}).get(name, 0))
            h.changed = int((data.get("changed") or {}).get(name, 0))
            h.failed = int((data.get("failures") or {}).get(name, 0))
            h.skipped = int((data.get("skipped") or {}).get(name, 0))
            h.rescued = int((data.get("rescued") or {}).get(name, 0))
            h.ignored = int((data.get("ignored") or {}).get(name, 0))
            if (data.get("dark") or {}).get(name):
                h.unreachable = True
            h.status = host_status(h)

    def totals(self) -> dict[str, int]:
        hs = list(self.hosts.values())
        return {
            "hosts": len(hs),
            "ok": sum(1 for h in hs if h.status in ("ok", "changed")),
            "changed": sum(h.changed for h in hs),
            "failed": sum(1 for h in hs if h.status == "failed"),
            "unreachable": sum(1 for h in hs if h.unreachable),
        }
