"""Clients nobody here wrote, pointed at the rack twin: the judges of twin/.

- `run_modules`: Ansible's community.vmware modules (PyPI's `ansible` 12.3.0, community.vmware
  5.10.0, with pyVmomi and `requests`), installed by .ci/setup.d/25-vsphere-judges.sh into their
  own virtual environment, run as one ansible-playbook against the twin, TLS verified with the
  twin's CA. A missing judge environment fails the test: CI installs it, a test never does.
- `read_sweep`: every property of every managed object reachable from the service content,
  read one at a time the way pyVmomi's property accessors read them (Fetch).
- `task_fault`: run a task-returning pyVmomi call the way govc waits for it, and return the
  fault it ends in (or None).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

JUDGES_VENV = Path(os.environ.get("RACKCERT_JUDGES_VENV", "/opt/rackcert-lab/judges"))


@dataclass
class Judge:
    """One community.vmware module call: module name, its arguments, check mode or not."""

    module: str
    args: dict[str, Any]
    check: bool = False
    label: str = ""

    @property
    def name(self) -> str:
        return self.label or self.module


def run_modules(lab: Any, judges: list[Judge], workdir: Path) -> dict[str, dict[str, Any]]:
    """Run every judge against the lab's twin in one playbook; task name -> module result."""
    playbook = JUDGES_VENV / "bin" / "ansible-playbook"
    assert playbook.is_file(), (
        f"the vSphere judges are not installed ({JUDGES_VENV}): run .ci/setup "
        "(.ci/setup.d/25-vsphere-judges.sh)"
    )
    vc = lab.spec.vcenter
    connection = {
        "hostname": "127.0.0.1",
        "port": lab.twin.port,
        "username": vc.user,
        "validate_certs": True,
    }
    tasks = []
    for judge in judges:
        task: dict[str, Any] = {
            "name": judge.name,
            f"community.vmware.{judge.module}": connection | judge.args,
            "ignore_errors": True,
        }
        if judge.check:
            task["check_mode"] = True
        tasks.append(task)
    workdir.mkdir(parents=True, exist_ok=True)
    book = workdir / "judges.yml"
    book.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    password = Path(lab.twin.files.password_file).read_text().strip()
    env = {
        "PATH": f"{JUDGES_VENV / 'bin'}:/usr/bin:/bin",
        "HOME": str(workdir),
        "VMWARE_PASSWORD": password,
        "SSL_CERT_FILE": str(lab.twin.files.cert_file),
        "ANSIBLE_STDOUT_CALLBACK": "json",
        "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
        "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
        "ANSIBLE_LOCAL_TEMP": str(workdir / "tmp"),
        "ANSIBLE_PYTHON_INTERPRETER": str(JUDGES_VENV / "bin" / "python"),
        "LANG": "C.UTF-8",
    }
    proc = subprocess.run(
        [str(playbook), "-i", "localhost,", "-c", "local", str(book)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=workdir,
    )
    assert password not in proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    out: dict[str, dict[str, Any]] = {}
    for task in report["plays"][0]["tasks"]:
        out[task["task"]["name"]] = task["hosts"]["localhost"]
    assert list(out) == [j.name for j in judges], proc.stderr[-2000:]
    return out


@dataclass
class Sweep:
    """What a read of every property found: how many reads, and what went wrong."""

    reads: int = 0
    objects: int = 0
    dropped: list[str] = field(default_factory=list)  # connection closed without an answer
    internal: list[str] = field(default_factory=list)  # SystemError: a handler panic answered
    dangling: list[str] = field(default_factory=list)  # a reference to an object that is not there
    other: list[str] = field(default_factory=list)  # faults a vCenter may give (newer properties)


def _refs(value: Any) -> Iterator[Any]:
    from pyVmomi import VmomiSupport

    if isinstance(value, VmomiSupport.ManagedObject):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _refs(item)
    elif isinstance(value, VmomiSupport.DataObject):
        for prop in value._GetPropertyList():
            yield from _refs(getattr(value, prop.name, None))


def read_sweep(si: Any) -> Sweep:
    """Read every property of every object reachable from the service content, one by one."""
    from http.client import HTTPException

    from pyVmomi import vmodl

    sweep = Sweep()
    content = si.RetrieveContent()
    todo = list(_refs(content))
    seen: set[tuple[str, str]] = set()
    while todo:
        obj = todo.pop()
        key = (type(obj).__name__, obj._moId)
        if key in seen:
            continue
        seen.add(key)
        for prop in obj._GetPropertyList():
            sweep.reads += 1
            where = f"{key[0]}:{key[1]}.{prop.name}"
            try:
                value = getattr(obj, prop.name)
            except (HTTPException, ConnectionError) as exc:
                sweep.dropped.append(f"{where}: {type(exc).__name__}")
                continue
            except vmodl.fault.ManagedObjectNotFound:
                sweep.dangling.append(where)
                break  # the object itself is not there: every property would say so
            except vmodl.fault.SystemError as exc:
                sweep.internal.append(f"{where}: {exc.msg}")
                continue
            except vmodl.MethodFault as exc:
                sweep.other.append(f"{where}: {type(exc).__name__}")
                continue
            todo.extend(_refs(value))
    sweep.objects = len(seen)
    return sweep


def task_fault(task: Any) -> Any:
    """Wait for a task as govc does (poll its info.state) and return its fault, or None."""
    from pyVim.task import WaitForTask
    from pyVmomi import vmodl

    try:
        WaitForTask(task)
    except vmodl.MethodFault as exc:
        return exc
    return None


def find(si: Any, kind: Any, name: str) -> Any:
    """The managed object of `kind` named `name` (as govc's inventory paths find it)."""
    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [kind], True)
    try:
        return next(o for o in view.view if o.name == name)
    finally:
        view.DestroyView()
