"""`rackcert lab up|down|status`: the embedded lab (vcsim rack twin + SSH test hosts).

`lab up` builds the twin if needed and starts it in the background from the spec
(default inventories/lab.yaml): loopback only, TLS with a self-signed certificate
written where the spec's tls.ca_file points, the password in the spec's
password_file (created if absent). Then it starts the spec's VMs as SSH test hosts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from rackcert.cli.common import JsonOpt, app, console, load, print_json
from rackcert.errors import InputError
from rackcert.paths import inventories_dir

lab_app = typer.Typer(
    help="Start and stop the embedded lab (vcsim twin, SSH hosts).", no_args_is_help=True
)
app.add_typer(lab_app, name="lab")

LabSpecArg = Annotated[
    Path | None,
    typer.Argument(help="Lab spec (default: inventories/lab.yaml)", show_default=False),
]


def _spec_path(path: Path | None) -> Path:
    return path or inventories_dir() / "lab.yaml"


def _workdir(spec: Any) -> Path:
    vc = spec.vcenter
    if vc.password_file:
        return Path(vc.password_file).expanduser().parent
    return Path("~/.cache/rackcert/lab").expanduser() / spec.metadata.name


def _state(workdir: Path) -> dict[str, Any] | None:
    path = workdir / "twin-state.json"
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    try:
        cmdline = Path(f"/proc/{state['pid']}/cmdline").read_bytes()
    except (OSError, KeyError):
        return None
    return state if b"rackcert-vcsim" in cmdline else None


def parse_faults(fail: list[str], slow: list[str], drop: list[str]) -> dict[str, Any]:
    """--fail METHOD[:TARGET[:COUNT]], --slow METHOD:MS, --drop METHOD[:COUNT]."""
    faults: dict[str, Any] = {"fail": [], "slow": [], "drop": []}
    try:
        for item in fail:
            method, target, count = ([*item.split(":"), "", ""])[:3]
            faults["fail"].append({"method": method, "target": target, "count": int(count or 1)})
        for item in slow:
            method, ms = item.split(":")
            faults["slow"].append({"method": method, "ms": int(ms)})
        for item in drop:
            method, count = ([*item.split(":"), ""])[:2]
            faults["drop"].append({"method": method, "count": int(count or 1)})
    except ValueError:
        raise InputError(
            "fault flags: --fail METHOD[:TARGET[:COUNT]], --slow METHOD:MS, --drop METHOD[:COUNT]"
        ) from None
    return faults


UP_HELP = (
    "Start the vcsim twin of the spec's rack in the background (and its VMs as SSH test hosts)."
    "\n\nLoopback only, TLS with a self-signed certificate written where the spec's"
    " tls.ca_file points, a random password written to its password_file (0600) unless one"
    " exists. --fail, --slow and --drop inject faults (COUNT -1: every call). Builds the twin"
    " (Go, GOPATH mode) the first time."
)


@lab_app.command("up", help=UP_HELP)
def up(
    spec_path: LabSpecArg = None,
    port: Annotated[int | None, typer.Option(help="Listen port (default: the spec's)")] = None,
    fail: Annotated[
        list[str], typer.Option("--fail", help="Fail a task: METHOD[:TARGET[:COUNT]]")
    ] = [],  # noqa: B006 - typer needs a list default
    slow: Annotated[list[str], typer.Option("--slow", help="Delay a call: METHOD:MS")] = [],  # noqa: B006
    drop: Annotated[
        list[str], typer.Option("--drop", help="Drop the connection: METHOD[:COUNT]")
    ] = [],  # noqa: B006
    ssh_hosts: Annotated[
        bool, typer.Option("--ssh-hosts/--no-ssh-hosts", help="Also start the VMs' SSH hosts")
    ] = True,
) -> None:
    """Start the vcsim twin of the spec's rack (and its VMs as SSH test hosts)."""
    from rackcert.lab import twin

    loaded = load(_spec_path(spec_path))
    spec = loaded.spec
    if spec.vcenter.host not in ("127.0.0.1", "localhost", "::1"):
        raise InputError(f"lab up: vcenter.host must be loopback, got {spec.vcenter.host}")
    workdir = _workdir(spec)
    state = _state(workdir)
    if state:
        console.print(f"twin already running: {state['url']} (pid {state['pid']})")
    else:
        files = twin.TwinFiles.for_spec(spec, workdir)
        desc = twin.description_from_spec(
            spec, files, port=port, faults=parse_faults(fail, slow, drop)
        )
        started = twin.start(desc, files, detach=True)
        console.print(
            f"[green]twin up[/]: {started.url} (pid {started.pid}), CA {files.cert_file},"
            f" password in {files.password_file}, SHA-256 {started.thumbprint}",
            emoji=False,
        )
    if ssh_hosts and spec.vms:
        from rackcert.lab import sshhosts

        hosts = sshhosts.start_lab_hosts(spec)
        console.print(
            "[green]SSH hosts up[/]: " + ", ".join(f"{h.name} {h.address}" for h in hosts),
            emoji=False,
        )


@lab_app.command("down")
def down(
    spec_path: LabSpecArg = None,
    ssh_hosts: Annotated[
        bool, typer.Option("--ssh-hosts/--no-ssh-hosts", help="Also stop the SSH hosts")
    ] = True,
) -> None:
    """Stop the twin (and the lab's SSH hosts). Safe when nothing runs."""
    from rackcert.lab import twin

    spec = load(_spec_path(spec_path)).spec
    workdir = _workdir(spec)
    state = _state(workdir)
    if state and twin.stop_pid(int(state["pid"])):
        console.print(f"twin stopped (pid {state['pid']})")
    else:
        console.print("twin was not running")
    (workdir / "twin-state.json").unlink(missing_ok=True)
    if ssh_hosts and os.geteuid() == 0:
        from rackcert.lab import sshhosts

        console.print(f"SSH hosts stopped: {sshhosts.stop_lab_hosts()}")


@lab_app.command("status")
def status(spec_path: LabSpecArg = None, as_json: JsonOpt = False) -> None:
    """Is the twin running, where, and with which certificate fingerprint."""
    spec = load(_spec_path(spec_path)).spec
    state = _state(_workdir(spec))
    if as_json:
        print_json({"running": bool(state), **(state or {})})
        return
    if state:
        console.print(f"twin running: {state['url']} (pid {state['pid']}), {state['hosts']} hosts")
    else:
        console.print("twin not running (rackcert lab up starts it)")
