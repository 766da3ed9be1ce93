"""Run site.yml through ansible-runner and record per-host results in configure.json.

Why ansible-runner and not a subprocess: its events are the structured truth of
a run (host, task, result), so the progress display, the record and the tests
read events instead of parsing Ansible's screen output. The shape follows
ansible-runner's own boundary: one small entry point, `configure(...)`, and one
hook, `on_event(event, collector)`, called for every event after it is counted.

Where things go (all inside the run directory):
    artifacts/configure/inventory/hosts.yml   generated from the spec
    artifacts/configure/ansible/<ident>/      ansible-runner's artifacts (events, stdout)
    artifacts/configure/known_hosts           host keys seen this run (accept-new)
    configure.json                            per host ok/changed/failed/unreachable
Secrets (a become password) are given to ansible-runner in memory, registered
with REDACTOR, and every text artifact is scrubbed again after the run.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rackcert.configure.events import EventCollector, HostResult
from rackcert.configure.inventory import build_inventory, write_inventory
from rackcert.errors import InputError
from rackcert.paths import playbooks_dir
from rackcert.runs import RunDir, utc_now
from rackcert.secrets import REDACTOR
from rackcert.spec_loader import LoadedSpec

EventHook = Callable[[dict[str, Any], EventCollector], None]


@dataclass
class ConfigureResult:
    status: str  # ok | failed
    rc: int
    check: bool
    hosts: list[HostResult]
    totals: dict[str, int]
    artifacts: Path
    record: Path
    error: str | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _ssh_args(known_hosts: Path) -> str:
    return " ".join(
        [
            "-o ControlMaster=auto -o ControlPersist=120s",
            f"-o UserKnownHostsFile={known_hosts}",
            "-o StrictHostKeyChecking=accept-new",
            "-o IdentitiesOnly=yes -o BatchMode=yes",
            "-o ConnectTimeout=10 -o ServerAliveInterval=5 -o ServerAliveCountMax=3",
        ]
    )


def _envvars(artifacts: Path, control_dir: Path, forks: int) -> dict[str, str]:
    roles = playbooks_dir() / "roles"
    return {
        "ANSIBLE_ROLES_PATH": str(roles),
        "ANSIBLE_SSH_ARGS": _ssh_args(artifacts / "known_hosts"),
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control_dir),
        "ANSIBLE_PIPELINING": "True",
        "ANSIBLE_FORKS": str(forks),
        "ANSIBLE_TIMEOUT": "15",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_PYTHON_INTERPRETER": "auto_silent",
        "ANSIBLE_LOCAL_TEMP": str(artifacts / "tmp"),
        "ANSIBLE_HOME": str(artifacts / "ansible-home"),
        "ANSIBLE_NOCOLOR": "True",
        "ANSIBLE_FORCE_COLOR": "False",
        "ANSIBLE_DEPRECATION_WARNINGS": "False",
        "ANSIBLE_SYSTEM_WARNINGS": "False",
        "PATH": _path_with_ansible(),
    }


def _drop_environment(directory: Path) -> None:
    """ansible-runner stores the whole process environment in `command`: keep argv and cwd only.

    The environment may hold secrets rackcert never resolved (another stage's password
    variable), which REDACTOR cannot know about.
    """
    for path in directory.glob("ansible/*/command"):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
            continue
        if isinstance(data, dict) and "env" in data:
            data.pop("env")
            path.write_text(json.dumps(data))


def _scrub_artifacts(directory: Path) -> None:
    """Defence in depth: re-scrub every text artifact with the secrets known to REDACTOR."""
    for path in directory.rglob("*"):
        if not path.is_file() or path.stat().st_size > 64 * 1024 * 1024:
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        scrubbed = REDACTOR.scrub(text)
        if scrubbed != text:
            path.write_text(scrubbed)


def _failure_line(collector: EventCollector, rc: int, stdout_tail: str) -> str | None:
    bad = [h for h in collector.hosts.values() if h.status in ("failed", "unreachable")]
    if not bad and rc == 0:
        return None
    if not bad:
        return f"ansible-playbook exited {rc}: {stdout_tail or 'no output'}"
    first = bad[0]
    where = first.failures[0] if first.failures else None
    detail = f" at '{where.role + ' : ' if where.role else ''}{where.task}': {where.message}"
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    return (
        f"{len(bad)} of {len(collector.hosts)} hosts not configured: {first.name}"
        f" {first.status}{detail if where else ''}{more}"
    )


def _stdout_tail(artifact_dir: Path) -> str:
    for path in sorted(artifact_dir.glob("*/stdout")):
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
        err = [ln for ln in lines if ln.startswith("ERROR!") or "[ERROR]" in ln]
        return REDACTOR.scrub(" ".join((err or lines[-2:])[:3]))[:600]
    return ""


def configure(
    loaded: LoadedSpec,
    run: RunDir,
    *,
    check: bool = False,
    tags: Sequence[str] = (),
    skip_tags: Sequence[str] = (),
    limit: str | None = None,
    become_password: str | None = None,
    extravars: dict[str, Any] | None = None,
    on_event: EventHook | None = None,
    playbook: Path | None = None,
) -> ConfigureResult:
    """Run site.yml against the spec's VMs; record configure.json in `run`; return the result.

    Args:
        loaded: the loaded spec (its VMs are the hosts).
        run: the run directory that receives artifacts and configure.json.
        check: Ansible check mode: report what would change, change nothing.
        tags / skip_tags: only / not these roles (each role is tagged with its name).
        limit: an Ansible host pattern, e.g. one VM name.
        become_password: sudo password, held in memory only.
        extravars: extra variables (tests use them to point vendor roles at a local repo).
        on_event: called as on_event(event, collector) after each event is counted.

    Example:
        result = configure(load_spec("inventories/lab.yaml"), run, check=True)
    """
    import ansible_runner  # heavy: imported only when configure runs

    spec = loaded.spec
    if not spec.vms:
        raise InputError(f"{loaded.path}: the spec has no vms to configure")
    playbook = playbook or playbooks_dir() / "site.yml"
    started = utc_now()
    artifacts = run.artifacts("configure")
    inventory = write_inventory(build_inventory(spec), artifacts / "inventory")
    (artifacts / "tmp").mkdir(exist_ok=True)
    # The bench worker the nodes run (`rackcert bench --nodes`): dl_runtime installs it.
    from rackcert.configure.worker_wheel import build_worker_wheel

    wheel = build_worker_wheel(artifacts / "wheels")
    extravars = {"dl_runtime_worker_wheel": str(wheel), **(extravars or {})}
    collector = EventCollector()
    ident = started.replace(":", "").replace("-", "")
    REDACTOR.add(become_password)

    def handler(event: dict[str, Any]) -> bool:
        collector.handle(event)
        if on_event is not None:
            on_event(event, collector)
        return True  # keep the event in the artifacts

    cmdline = ["--check"] if check else []
    passwords = {}
    if become_password:
        cmdline.append("--ask-become-pass")
        passwords[r"^BECOME password.*:\s*?$"] = become_password

    def record(rc: int, error: str | None) -> Path:
        """configure.json from what the collector saw: on success, failure or interruption."""
        return _write_record(
            run, collector, started, check, tags, skip_tags, limit, playbook, rc,
            artifacts, inventory, ident, error,
        )  # fmt: skip

    rc, status = 1, "failed"
    with tempfile.TemporaryDirectory(prefix="rc-cp-", dir="/tmp") as control_dir:
        try:
            runner = ansible_runner.run(
                private_data_dir=str(artifacts),
                artifact_dir=str(artifacts / "ansible"),
                ident=ident,
                playbook=str(playbook),
                inventory=str(inventory),
                envvars=_envvars(artifacts, Path(control_dir), max(5, min(len(spec.vms), 32))),
                extravars=extravars,
                passwords=passwords,
                cmdline=" ".join(cmdline) or None,
                tags=",".join(tags) or None,
                skip_tags=",".join(skip_tags) or None,
                limit=limit,
                event_handler=handler,
                quiet=True,
                settings={"suppress_ansible_output": True, "job_timeout": 3600},
            )
            rc = int(runner.rc if runner.rc is not None else 1)
            status = "ok" if runner.status == "successful" and rc == 0 else "failed"
        except KeyboardInterrupt:
            # Record what was seen so far, then let the CLI say "interrupted".
            record(130, "interrupted by the operator")
            raise
        finally:
            _drop_environment(artifacts)
            _scrub_artifacts(artifacts)
            env_dir = artifacts / "env"
            if env_dir.is_dir():
                for leftover in env_dir.iterdir():  # runner may persist passwords/ssh_key here
                    if leftover.name in ("passwords", "ssh_key"):
                        leftover.unlink()
    error = _failure_line(collector, rc, _stdout_tail(artifacts / "ansible"))
    if not error and not collector.hosts and loaded.spec.vms:
        # Ansible succeeds on an empty host list; for rackcert that configured nothing.
        warned = "; ".join(collector.warnings[:1])
        count = len(loaded.spec.vms)
        error = f"Ansible ran on no host of the spec's {count} VMs ({warned or 'check --limit'})"
    if error:
        status = "failed"
    hosts = sorted(collector.hosts.values(), key=lambda h: h.name)
    record_path = record(rc, error)
    return ConfigureResult(
        status=status,
        rc=rc,
        check=check,
        hosts=hosts,
        totals=collector.totals(),
        artifacts=artifacts,
        record=record_path,
        error=error,
        warnings=collector.warnings,
    )


def _write_record(
    run: RunDir,
    collector: EventCollector,
    started: str,
    check: bool,
    tags: Sequence[str],
    skip_tags: Sequence[str],
    limit: str | None,
    playbook: Path,
    rc: int,
    artifacts: Path,
    inventory: Path,
    ident: str,
    error: str | None,
) -> Path:
    """configure.json: per-host results and where the artifacts are (scrubbed by RunDir)."""
    hosts = sorted(collector.hosts.values(), key=lambda h: h.name)
    data = {
        "check": check,
        "tags": list(tags),
        "skip_tags": list(skip_tags),
        "limit": limit,
        "playbook": str(playbook),
        "rc": rc,
        "totals": collector.totals(),
        "hosts": {h.name: h.to_dict() for h in hosts},
        "artifacts": str(artifacts.relative_to(run.path)),
        "inventory": str(inventory.relative_to(run.path)),
        "ansible_ident": ident,
        "warnings": collector.warnings,
    }
    status = "failed" if error or rc != 0 else "ok"
    return run.write_stage("configure", data, status=status, error=error, started_at=started)


def _path_with_ansible() -> str:
    """PATH with the directory of ansible-playbook first (a venv that is not on PATH)."""
    path = os.environ.get("PATH", "/usr/bin:/bin")
    beside = Path(sys.executable).parent
    if (beside / "ansible-playbook").is_file():
        return f"{beside}{os.pathsep}{path}"
    if not shutil.which("ansible-playbook"):
        raise InputError("ansible-playbook not found: install ansible-core (pip install rackcert)")
    return path
