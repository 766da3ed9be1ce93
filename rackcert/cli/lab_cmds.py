"""`rackcert lab up|down|status`: the embedded lab (vcsim rack twin + SSH test hosts).

`lab up` builds the twin if needed and starts it in the background from the spec
(default inventories/lab.yaml): loopback only, TLS with a self-signed certificate
written where the spec's tls.ca_file points, the password in the spec's
password_file (created if absent), the guests' SSH key pair at guest.ssh.key_file.
Then it starts the lab's guest agent (rackcert.lab.guest_agent), which brings up
an SSH test host for each twin VM that powers on with cloud-init guestinfo: no
host answers before provision has cloned and powered on the VMs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from rackcert.cli.common import (
    JsonOpt,
    RunsRootOpt,
    app,
    console,
    default_runs_root,
    load,
    print_json,
)
from rackcert.core.errors import InputError
from rackcert.core.paths import inventories_dir
from rackcert.core.untrusted import markup

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
    "Start the vcsim twin of the spec's rack in the background, and the lab's guest agent."
    "\n\nThe agent watches the twin's VMs (WaitForUpdatesEx) and brings up an SSH test host"
    " for each VM that powers on with cloud-init guestinfo (hostname, address, key), and takes"
    " it down at power-off: hosts are born from provision, not from lab up."
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
        bool,
        typer.Option(
            "--ssh-hosts/--no-ssh-hosts",
            help="Also run the guest agent (SSH hosts for the VMs provision powers on)",
        ),
    ] = True,
    capture: Annotated[
        Path | None,
        typer.Option("--capture", help="Serve this capture (rackcert capture) instead"),
    ] = None,
    slurm: Annotated[
        bool,
        typer.Option(
            "--slurm",
            help="Also a real Slurm: munged and slurmctld here, a spec with its slurm block"
            " (configure's slurm_node role starts slurmd in each node)",
        ),
    ] = False,
    monitoring: Annotated[
        bool,
        typer.Option(
            "--monitoring",
            help="Also Prometheus and node_exporter on loopback (Debian's packages), scraping"
            " `rackcert serve` over --runs-dir and a textfile directory (docs/monitoring.md)",
        ),
    ] = False,
    foreground: Annotated[
        bool,
        typer.Option(
            "--foreground",
            help="Stay in the foreground until Ctrl-C, SIGTERM or SIGHUP, then stop the lab"
            " (as lab down) and exit; a lab whose foreground run was killed outright is"
            " cleared by the next one",
        ),
    ] = False,
    runs_dir: RunsRootOpt = None,  # type: ignore[assignment]
) -> Path | None:
    """Start the vcsim twin of the spec's rack and the guest agent."""
    if foreground:
        _up_foreground(
            _spec_path(spec_path),
            ssh_hosts,
            lambda: up(spec_path, port, fail, slow, drop, ssh_hosts, capture, slurm, monitoring,
                       runs_dir=runs_dir),
        )  # fmt: skip
        return None
    from rackcert.lab import twin

    loaded = load(_spec_path(spec_path))
    spec = loaded.spec
    if spec.vcenter.host not in ("127.0.0.1", "localhost", "::1"):
        raise InputError(f"lab up: vcenter.host must be loopback, got {spec.vcenter.host}")
    guests_line = ""
    if ssh_hosts and spec.vms:  # before anything starts: a family the lab cannot build refuses
        from rackcert.lab.guestfamily import lab_family

        guests_line = lab_family(spec.guest.os)[1]
    workdir = _workdir(spec)
    state = _state(workdir)
    if state:
        console.print(f"twin already running: {state['url']} (pid {state['pid']})")
    else:
        files = twin.TwinFiles.for_spec(spec, workdir)
        desc = twin.description_from_spec(
            spec, files, port=port, faults=parse_faults(fail, slow, drop)
        )
        from rackcert.lab.depot import lab_depot

        depot = lab_depot(spec)  # the next ESXi patch and nmlx5, for a roll (docs/lab.md)
        if depot is not None:
            desc["vlcm"] = depot
        if capture is not None:  # the captured inventory, on the spec's port and password
            from rackcert.lab.replay import capture_description

            desc = capture_description(capture, spec, files, desc, console.print)
        started = twin.start(desc, files, detach=True)
        console.print(
            f"[green]twin up[/]: {started.url} (pid {started.pid}), CA {files.cert_file},"
            f" password in {files.password_file}, SHA-256 {started.thumbprint}",
            emoji=False,
        )
    if spec.guest.ssh.key_file:
        from rackcert.lab.sshhosts.sshd import ensure_keypair

        ensure_keypair(Path(spec.guest.ssh.key_file).expanduser())
    if ssh_hosts and spec.vms:
        pid = _start_agent(_spec_path(spec_path), workdir)
        console.print(
            f"[green]guest agent up[/] (pid {pid}): an SSH host for each VM that powers on"
            f" with cloud-init guestinfo; log {workdir / 'agent.log'}",
            emoji=False,
        )
        if guests_line:
            console.print(markup(guests_line), soft_wrap=True)
    if monitoring:
        _up_monitoring(workdir, runs_dir or default_runs_root())
    if slurm:
        return _up_slurm(_spec_path(spec_path), spec, workdir)
    return None


def _up_foreground(spec_path: Path, ssh_hosts: bool, start: Any) -> None:
    """`lab up --foreground`: start, then wait for a signal (or the twin's end), then lab down.

    The lab is owned by this process (rackcert.lab.lifetime): its parts carry its pid, so
    whatever a kill -9 of it leaves is cleared by the next owned run.
    """
    from rackcert.cli.common import owned_lab
    from rackcert.lab.lifetime import Terminated, signal_name

    spec = load(spec_path).spec
    running = _state(_workdir(spec))
    if running:
        raise InputError(
            f"lab up --foreground: the lab's twin already runs (pid {running['pid']});"
            " stop it first with `rackcert lab down`"
        )
    with owned_lab("rackcert lab up"):
        started = False
        try:
            start()
            started = True
            state = _state(_workdir(spec))
            console.print("lab up in the foreground: Ctrl-C, SIGTERM or SIGHUP stops it")
            while state and _state(_workdir(spec)):
                time.sleep(0.5)
            raise InputError("lab up: the twin ended on its own; the lab is stopped")
        except Terminated as stop:
            if not started:
                raise  # stopped while starting: the exit code says which signal
            console.print(f"{signal_name(stop.signum)}: stopping the lab")
        finally:
            down(spec_path, ssh_hosts=ssh_hosts)


def _up_monitoring(workdir: Path, runs_root: Path) -> None:
    from rackcert.lab.monitoring import MonitoringError, start_lab_monitoring

    try:
        state = start_lab_monitoring(workdir, runs_root.resolve())
    except MonitoringError as exc:
        raise InputError(f"lab up --monitoring: {exc}") from None
    textfile = Path(state["textfile_dir"]) / "rackcert.prom"
    console.print(
        f"[green]monitoring up[/]: Prometheus {state['prometheus']} (rackcert's alert rules),"
        f" node_exporter {state['node_exporter']}, serve {state['serve']}/metrics;"
        f" write textfiles with --metrics-textfile {markup(textfile)}",
        emoji=False,
        soft_wrap=True,
    )


def _up_slurm(spec_path: Path, spec: Any, workdir: Path) -> Path:
    if os.geteuid() != 0:
        raise InputError("lab up --slurm needs root (the controller binds the lab bridge)")
    from rackcert.lab.slurm import start_lab_slurm

    started = time.monotonic()
    lab, slurm_spec = start_lab_slurm(spec_path, spec, workdir)
    console.print(
        f"[green]slurm up[/] in {time.monotonic() - started:.1f}s: slurmctld"
        f" {lab.address}:{lab.port}, cluster {lab.cluster}, SLURM_CONF={lab.conf};"
        f" spec with its slurm block: {slurm_spec}",
        emoji=False,
        soft_wrap=True,
    )
    return slurm_spec


def _agent_pid(workdir: Path) -> int | None:
    """The running agent's pid, if the pid file names a live `lab agent` process."""
    try:
        pid = int((workdir / "agent.pid").read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if b"lab\x00agent" in cmdline else None


def _start_agent(spec_path: Path, workdir: Path) -> int:
    """`rackcert lab agent SPEC` detached; needs root (network namespaces)."""
    if os.geteuid() != 0:
        raise InputError("lab up: the guest agent needs root (network namespaces for SSH hosts)")
    pid = _agent_pid(workdir)
    if pid:
        return pid
    log = open(workdir / "agent.log", "ab")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [sys.executable, "-m", "rackcert.cli", "lab", "agent", str(spec_path.resolve())],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    log.close()
    (workdir / "agent.pid").write_text(str(proc.pid))
    return proc.pid


def _stop_agent(workdir: Path) -> int | None:
    pid = _agent_pid(workdir)
    if pid:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while _agent_pid(workdir) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _agent_pid(workdir):
            os.kill(pid, signal.SIGKILL)
    (workdir / "agent.pid").unlink(missing_ok=True)
    return pid


@lab_app.command("agent", hidden=True)
def agent_cmd(spec_path: LabSpecArg = None) -> None:
    """Run the lab's guest agent in the foreground (lab up starts it detached)."""
    import logging

    from rackcert.lab.guest_agent import GuestAgent

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    spec = load(_spec_path(spec_path)).spec
    agent = GuestAgent(spec)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # each stops its guests
        signal.signal(signum, lambda *_: agent.stop())
    agent.run()


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
    pid = _stop_agent(workdir)  # first, so it does not watch a vCenter going away
    if pid:
        console.print(f"guest agent stopped (pid {pid})")
    state = _state(workdir)
    if state and twin.stop_pid(int(state["pid"])):
        console.print(f"twin stopped (pid {state['pid']})")
    else:
        console.print("twin was not running")
    (workdir / "twin-state.json").unlink(missing_ok=True)
    from rackcert.lab.monitoring import stop_lab_monitoring

    if stop_lab_monitoring(workdir):
        console.print("monitoring stopped")
    if os.geteuid() == 0:
        from rackcert.lab.slurm import stop_lab_slurm

        if stop_lab_slurm(spec, workdir):
            console.print("slurm stopped")
    if ssh_hosts and os.geteuid() == 0:
        from rackcert.lab.sshhosts.lab import stop_spec_hosts

        console.print(f"SSH hosts stopped: {stop_spec_hosts(spec)}")


@lab_app.command("status")
def status(spec_path: LabSpecArg = None, as_json: JsonOpt = False) -> None:
    """Is the twin running, where, and with which certificate fingerprint."""
    from rackcert.lab.slurm import SlurmLab, lab_owner

    spec = load(_spec_path(spec_path)).spec
    state = _state(_workdir(spec))
    slurm = SlurmLab.load(lab_owner(spec))
    slurm_up = slurm is not None and slurm.controller_up()
    if as_json:
        print_json(
            {
                "running": bool(state),
                **(state or {}),
                "agent_pid": _agent_pid(_workdir(spec)),
                "slurm": {"running": slurm_up, "conf": str(slurm.conf)} if slurm else None,
            }
        )
        return
    if state:
        console.print(f"twin running: {state['url']} (pid {state['pid']}), {state['hosts']} hosts")
    else:
        console.print("twin not running (rackcert lab up starts it)")
    agent = _agent_pid(_workdir(spec))
    console.print(f"guest agent running (pid {agent})" if agent else "guest agent not running")
    if slurm is not None:
        where = f"{slurm.address}:{slurm.port}, SLURM_CONF={slurm.conf}"
        console.print(
            f"slurm running: {where}" if slurm_up else f"slurm not answering ({where})",
            soft_wrap=True,
        )
