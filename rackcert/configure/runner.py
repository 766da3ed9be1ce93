"""Run site.yml through ansible-runner and record per-host results in configure.json.

Why ansible-runner and not a subprocess: its events are the structured truth of
a run (host, task, result), so the progress display, the record and the tests
read events instead of parsing Ansible's screen output. The shape follows
ansible-runner's own boundary: one small entry point, `configure(...)`, and one
hook, `on_event(event, collector)`, called for every event after it is counted.

Where things go (all inside the run directory):
    artifacts/configure/inventory/hosts.yml   generated from the spec
    artifacts/configure/ansible/<ident>/      ansible-runner's artifacts (events, stdout)
    <runs>/<rack>/known_hosts                 the rack's host keys, enrolled once, then enforced
    configure.json                            per host ok/changed/failed/unreachable
Secrets (a become password) are given to ansible-runner in memory, registered
with REDACTOR, and every text artifact is scrubbed again after the run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rackcert.configure.collection import collections_root
from rackcert.configure.events import EventCollector
from rackcert.configure.inventory import build_inventory, dump_unsafe_yaml, write_inventory
from rackcert.configure.strategy import strategy_envvars
from rackcert.core.childenv import secret_variables
from rackcert.core.errors import InputError
from rackcert.core.known_hosts import (
    Enrolled,
    enroll,
    is_pinned,
    peer_lines,
    rack_file,
    ssh_options,
)
from rackcert.core.paths import playbooks_dir
from rackcert.core.runs import RunDir, runs_root_of, utc_now
from rackcert.core.secrets import REDACTOR
from rackcert.core.spec_loader import LoadedSpec
from rackcert.core.stage_records import ConfigureData, ConfigureRecord
from rackcert.core.untrusted import cap_strings

EventHook = Callable[[dict[str, Any], EventCollector], None]


# The signals ansible-runner takes over (ansible_runner.utils.signal_handler, 2.4).
_RUNNER_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextlib.contextmanager
def runner_signals() -> Iterator[Callable[[], bool] | None]:
    """The cancel callback to give ansible-runner, and this process's signal handlers back after.

    Why: without a cancel callback, ansible-runner installs its own SIGTERM and SIGINT
    handlers (they only set an event that cancels the playbook) and never restores the ones
    it replaced. A run that owns a lab (rackcert.lab.lifetime: `rackcert demo`, a benchmark)
    then lost its own answer to SIGTERM for good: a SIGTERM during configure became a
    canceled playbook and an exit 1, and after configure it was ignored altogether. Where
    this process has a handler of its own for SIGTERM (a Python callable), the callback
    given never cancels, so that handler stays in charge (it stops the run and its lab);
    otherwise None: ansible-runner's own handler cancels the playbook, as before. Either
    way the handlers in place before are put back afterwards.
    """
    if threading.current_thread() is not threading.main_thread():
        # Only the main thread may set a handler (signal.signal raises ValueError elsewhere),
        # and ansible-runner sets none off it: nothing to keep. `rackcert upgrade` configures
        # the nodes of a host from worker threads (a ValueError there failed every node).
        yield None
        return
    before = {signum: signal.getsignal(signum) for signum in _RUNNER_SIGNALS}
    own = callable(before[signal.SIGTERM])
    try:
        yield (lambda: False) if own else None
    finally:
        for signum, handler in before.items():
            if handler is not None:
                signal.signal(signum, handler)


def _ssh_args(known_hosts: Path) -> str:
    """Ansible's ssh options: only the rack's enrolled keys (rackcert.core.known_hosts)."""
    return " ".join(
        [
            "-o ControlMaster=auto -o ControlPersist=120s",
            *(f"-o {opt}" for opt in ssh_options(known_hosts)[1::2]),
            "-o IdentitiesOnly=yes -o BatchMode=yes",
            "-o ConnectTimeout=10 -o ServerAliveInterval=5 -o ServerAliveCountMax=3",
        ]
    )


# Settings Ansible takes from a config file only (no environment variable exists for them).
# internal_poll_interval: while a task runs, ansible-playbook's strategy sleeps this long
# between looks at its workers' results; the default, 1 ms, wakes it a thousand times a second
# for every second a node works (Ansible's docs: higher values suit automation where CPU
# matters). Measured on tests/integration/test_configure_site.py (two site.yml runs, two nodes,
# 2 cores): 125.4 and 121.7 CPU-s at 1 ms, 108-121 (mean 114) at 10 ms, 113.0 at 5 ms. 5 ms keeps
# most of that for half the added latency (at most 5 ms a task, ~300 tasks a run).
ANSIBLE_CFG = "[defaults]\ninternal_poll_interval = 0.005\n"
# Where ansible-playbook finds an operator's config file: it runs in the artifacts directory
# (no ansible.cfg there), and ANSIBLE_CONFIG from this environment never reaches it (_runner_env).
_OPERATOR_CFGS = ("~/.ansible.cfg", "/etc/ansible/ansible.cfg")


def _ansible_cfg(artifacts: Path) -> dict[str, str]:
    """ANSIBLE_CONFIG for the run: rackcert's ansible.cfg in the artifacts, unless the operator
    has a config file of their own, which Ansible reads instead (one file is read, never two):
    it stays in charge, so an operator's config never loses a setting to rackcert's."""
    if any(Path(p).expanduser().is_file() for p in _OPERATOR_CFGS):
        return {}
    path = artifacts / "ansible.cfg"
    path.write_text(ANSIBLE_CFG)
    return {"ANSIBLE_CONFIG": str(path)}


def _envvars(
    artifacts: Path, control_dir: Path, forks: int, known_hosts: Path, strategy_env: dict[str, str]
) -> dict[str, str]:
    roles = playbooks_dir() / "roles"
    return {
        **strategy_env,
        **_ansible_cfg(artifacts),
        "ANSIBLE_ROLES_PATH": str(roles),
        # site.yml names roles by FQCN (rackcert.gpu.*): the shipped roles, as a collection.
        "ANSIBLE_COLLECTIONS_PATH": str(collections_root(control_dir / "collections")),
        "ANSIBLE_SSH_ARGS": _ssh_args(known_hosts),
        "ANSIBLE_HOST_KEY_CHECKING": "True",
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


@dataclass
class _HostKeys:
    path: Path
    pinned: bool
    enrolled: list[Enrolled]
    peer_lines: list[str]

    def record(self) -> dict[str, Any]:
        return {
            "known_hosts": str(self.path),
            "pinned": self.pinned,
            "enrolled": [e.to_dict() for e in self.enrolled],
        }


def _host_keys(spec: Any, run: RunDir, runs_root: Path | None, enrol: bool) -> _HostKeys:
    """Enrol the VMs the rack's known_hosts does not know yet (unless `enrol` is off: a roll
    trusts only what is enrolled); the lines ssh_trust installs."""
    path = rack_file(spec, runs_root if runs_root is not None else runs_root_of(run))
    pinned = is_pinned(spec)
    hosts = [(vm.address, vm.ssh_port) for vm in spec.vms]
    enrolled = enroll(path, hosts, pinned=pinned) if enrol else []
    peers = [(vm.name, vm.address, vm.ssh_port) for vm in spec.vms]
    return _HostKeys(path, pinned, enrolled, peer_lines(path, peers) if path.is_file() else [])


def _runner_env(
    prepared: dict[str, str], ours: dict[str, str], withheld: Sequence[str]
) -> dict[str, str]:
    """ansible-runner seeds Ansible's environment with ours whole: keep only named variables.

    What runner itself set or changed (its callback plugin path, our ANSIBLE_*
    settings) stays; what it merely copied from this process goes, unless
    rackcert.core.childenv names it. The password variables are withheld outright.
    """
    from rackcert.core.childenv import child_env

    own = {k: v for k, v in prepared.items() if os.environ.get(k) != v or k in ours}
    return child_env(own, withheld=withheld)


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
    detail = (
        f" at '{where.role + ' : ' if where.role else ''}{where.task}': {where.message}"
        if where is not None
        else ""
    )
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
    operator_vars: Sequence[str] = (),
    on_event: EventHook | None = None,
    playbook: Path | None = None,
    verbosity: int = 0,
    versions_from: Path | None = None,
    host_vars: dict[str, dict[str, Any]] | None = None,
    runs_root: Path | None = None,
    enrol: bool = True,
) -> ConfigureRecord:
    """Run site.yml against the spec's VMs; record configure.json in `run`; return that record.

    Args:
        loaded: the loaded spec (its VMs are the hosts).
        run: the run directory that receives artifacts and configure.json.
        check: Ansible check mode: report what would change, change nothing.
        tags / skip_tags: only / not these roles (each role is tagged with its name).
        limit: an Ansible host pattern, e.g. one VM name.
        become_password: sudo password, held in memory only.
        extravars: extra variables (tests use them to point vendor roles at a local repo),
            written `!unsafe`: data, never templates.
        operator_vars: the operator's own `--extra-vars` values (`@file.yml`, `k=v`, JSON),
            passed to ansible-playbook as `-e` unchanged, after `extravars` (so they win).
        on_event: called as on_event(event, collector) after each event is counted.
        verbosity: Ansible's -v count (`rackcert -vv configure` passes 2).
        versions_from: an earlier configure run (or its configure.json): each node of
            `limit` (all when none) goes back to the versions recorded there before that
            run changed them (rackcert.configure.rollback).
        host_vars: per VM, variables for that node only (the CLI gives each vGPU VM its
            host's vGPU manager version from the recorded discovery), written `!unsafe`.
        runs_root: where the rack's runs (and its known_hosts) live; default: the root `run`
            lies under (a roll's per-node run, nested in the roll's, must be given it).
        enrol: trust on first contact the nodes the rack's known_hosts lacks (off in a
            roll: a node not enrolled is refused by ssh, never trusted anew).

    Example:
        result = configure(load_spec("inventories/lab.yaml"), run, check=True)
    """
    import ansible_runner  # heavy: imported only when configure runs

    spec = loaded.spec
    if not spec.vms:
        raise InputError(f"{loaded.path}: the spec has no vms to configure")
    strategy_env = strategy_envvars(spec.guest.ansible_strategy)  # refused before anything runs
    playbook = playbook or playbooks_dir() / "site.yml"
    started = utc_now()
    artifacts = run.artifacts("configure")
    inventory_data = build_inventory(spec)
    nodes = inventory_data["all"]["children"]["rackcert_nodes"]["hosts"]
    for vm, values in (host_vars or {}).items():
        if vm in nodes:
            nodes[vm].update(values)
    if versions_from is not None:
        _pin_recorded_versions(inventory_data, versions_from, limit)
    inventory = write_inventory(inventory_data, artifacts / "inventory")
    (artifacts / "tmp").mkdir(exist_ok=True)
    # The bench worker the nodes run (`rackcert bench --nodes`): dl_runtime installs it.
    from rackcert.configure.worker_wheel import build_worker_wheel

    wheel = build_worker_wheel(artifacts / "wheels")
    extravars = {"dl_runtime_worker_wheel": str(wheel), **(extravars or {})}
    if spec.guest.serial:  # a play keyword: extra vars reach it, inventory vars do not
        extravars = {"rackcert_serial": spec.guest.serial, **extravars}
    if spec.slurm is not None and spec.slurm.health_check is not None:
        # The health check on the nodes reads this spec (a file here, copied by slurm_node).
        extravars = {"slurm_node_health_check_spec_src": str(loaded.path), **extravars}
    collector = EventCollector()
    ident = started.replace(":", "").replace("-", "")
    REDACTOR.add(become_password)
    keys = _host_keys(spec, run, runs_root, enrol)

    def handler(event: dict[str, Any]) -> bool:
        collector.handle(event)
        if on_event is not None:
            on_event(event, collector)
        return True  # keep the event in the artifacts

    cmdline = ["--check"] if check else []
    # ssh_trust installs the host keys the controller enrolled (or the spec pinned).
    extravars = {"ssh_trust_known_hosts": keys.peer_lines, **(extravars or {})}
    if extravars:
        # Written by rackcert, every string `!unsafe`: extra vars are data, never templates.
        extra_file = artifacts / "inventory" / "extra_vars.yml"
        extra_file.write_text(dump_unsafe_yaml(extravars))
        cmdline += ["--extra-vars", shlex.quote(f"@{extra_file}")]
    passwords = {}
    if become_password:
        cmdline.append("--ask-become-pass")
        passwords[r"^BECOME password.*:\s*?$"] = become_password

    def record(rc: int, error: str | None) -> ConfigureRecord:
        """configure.json from what the collector saw: on success, failure or interruption."""
        return _write_record(
            run, collector, started, check, tags, skip_tags, limit, playbook, rc,
            artifacts, inventory, ident, error, keys.record(), operator_vars,
            spec.guest.ansible_strategy,
        )  # fmt: skip

    rc = 1
    with tempfile.TemporaryDirectory(prefix="rc-cp-", dir="/tmp") as control_dir:
        # The operator's own Ansible input, as given, like -e; its values never reach the
        # artifacts (ansible-runner keeps its command line in env/cmdline and `command`).
        for value in _operator_var_args(operator_vars, Path(control_dir)):
            cmdline += ["--extra-vars", shlex.quote(value)]
        forks = max(5, min(len(spec.vms), 32))
        envvars = _envvars(artifacts, Path(control_dir), forks, keys.path, strategy_env)
        try:
            with runner_signals() as cancel_callback:
                runner = ansible_runner.interface.init_runner(
                    private_data_dir=str(artifacts),
                    artifact_dir=str(artifacts / "ansible"),
                    ident=ident,
                    playbook=str(playbook),
                    inventory=str(inventory),
                    envvars=envvars,
                    passwords=passwords,
                    cmdline=" ".join(cmdline) or None,
                    tags=",".join(tags) or None,
                    skip_tags=",".join(skip_tags) or None,
                    limit=limit,
                    verbosity=verbosity or None,
                    event_handler=handler,
                    quiet=True,
                    cancel_callback=cancel_callback,
                    settings={"suppress_ansible_output": True, "job_timeout": 3600},
                )
                runner.config.env = _runner_env(runner.config.env, envvars, secret_variables(spec))
                runner.run()
            rc = int(runner.rc if runner.rc is not None else 1)
            if runner.status != "successful" and rc == 0:
                rc = 1  # timed out or canceled: ansible-runner says so in status, not rc
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
    return record(rc, error)


def _pin_recorded_versions(inventory: dict[str, Any], source: Path, limit: str | None) -> None:
    """Put the versions recorded in `source` into the host vars of the limited nodes."""
    from rackcert.configure.rollback import versions_host_vars

    nodes = inventory["all"]["children"]["rackcert_nodes"]["hosts"]
    wanted = [n for n in nodes if limit is None or n in limit.split(",")]
    for vm, hv in versions_host_vars(source, wanted or list(nodes)).items():
        nodes[vm].update(hv)


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
    host_keys: dict[str, Any],
    operator_vars: Sequence[str] = (),
    strategy: str = "",
) -> ConfigureRecord:
    """configure.json: per-host results and where the artifacts are (scrubbed by RunDir)."""
    hosts = sorted(collector.hosts.values(), key=lambda h: h.name)
    events = str(artifacts.relative_to(run.path))
    data = {
        "check": check,
        "tags": list(tags),
        "skip_tags": list(skip_tags),
        "limit": limit,
        "playbook": str(playbook),
        "rc": rc,
        "totals": collector.totals(),
        # A node's long message is cut here; the Ansible events under artifacts keep the whole.
        "hosts": {h.name: cap_strings(h.model_dump(mode="json"), where=events) for h in hosts},
        "artifacts": str(artifacts.relative_to(run.path)),
        "inventory": str(inventory.relative_to(run.path)),
        "ansible_ident": ident,
        "strategy": strategy,
        "extra_vars": [_extra_vars_label(v) for v in operator_vars],
        "warnings": cap_strings(collector.warnings, where=events),
        "host_keys": host_keys,
    }
    status = "failed" if error or rc != 0 else "ok"
    record = run.write_stage(
        "configure", ConfigureData.model_validate(data), status=status, error=error,
        started_at=started,
    )  # fmt: skip
    assert isinstance(record, ConfigureRecord)
    return record


def _operator_var_args(values: Sequence[str], directory: Path) -> list[str]:
    """Each --extra-vars value as ansible-playbook gets it: `@file` as given, the others moved
    into a file of `directory` (private, removed after the run) so no value is kept.

    `key=value` text is parsed with Ansible's own parse_kv, which is what ansible-playbook does
    with it (ansible.utils.vars.load_extra_vars); YAML/JSON text is written as it is.
    """
    args: list[str] = []
    for index, value in enumerate(values):
        text = value.strip()
        if text.startswith("@"):
            args.append(value)
            continue
        # Imported only here: ansible-core patches sys.intern when its module_utils load,
        # which breaks torch.compile later in the same process (a library caller's bench).
        from ansible.parsing.splitter import parse_kv

        path = directory / f"operator-vars-{index}.yml"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as handle:
            if text.startswith(("{", "[")):
                handle.write(value)
            else:
                handle.write(yaml.safe_dump(parse_kv(value), default_flow_style=False))
        args.append(f"@{path}")
    return args


def _extra_vars_label(value: str) -> str:
    """What the record keeps of one --extra-vars value: the file, or the variable names.

    Values stay out: an operator may pass a token on the command line.
    """
    if value.startswith("@"):
        return value
    names = [w.split("=", 1)[0] for w in shlex.split(value) if "=" in w]
    return " ".join(f"{n}=..." for n in names) if names else "(inline YAML/JSON)"


def _path_with_ansible() -> str:
    """PATH with the directory of ansible-playbook first (a venv that is not on PATH)."""
    path = os.environ.get("PATH", "/usr/bin:/bin")
    beside = Path(sys.executable).parent
    if (beside / "ansible-playbook").is_file():
        return f"{beside}{os.pathsep}{path}"
    if not shutil.which("ansible-playbook"):
        raise InputError("ansible-playbook not found: install ansible-core (pip install rackcert)")
    return path
