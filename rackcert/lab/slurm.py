"""The lab's real Slurm: Debian's munged and slurmctld beside the lab's SSH hosts.

Why: certification under Slurm (bench as Slurm jobs, validate as the health check) must
be tested against the real scheduler, not a fake `srun`. One machine plays the cluster:

- one munged and one slurmctld in the root network namespace, slurmctld in its own UTS
  and mount namespace (`unshare --uts --mount`) whose hostname is the controller's name
  and whose /etc/hosts (a bind mount) names the bridge address, because with
  `CommunicationParameters=NoCtldInAddrAny` it binds to getaddrinfo(gethostname()) and
  must find itself as SlurmctldHost; the machine's hostname stays untouched;
- one slurmd inside each node (an SSH test host: its network, mount and UTS namespace),
  started by configure's `slurm_node` role as on a real rack; the node's jobs therefore
  see the node's own filesystem (its DL environment). The host's mount namespace has
  its own /sys (ip netns exec remounts it), where slurmd finds no cgroup filesystem and
  dies: `prepare_node` mounts cgroup2 there. `start_slurmds` starts them without the role,
  for a test that is about something else than the join (a node's firewall): seconds, not
  a configure run.

Everything is per lab (`owner`: "lab", or a test's pid): one directory under
/run/rackcert-slurm/ (outside /root and the hosts' overlays, so the nodes see it),
the munge socket and key, the ports, the controller's name, and per-node files with
Slurm's `%n` (PMIx's TmpFS too, whose /tmp/spmix_appdir_* two nodes would share).

Versions seen working: slurm-wlm 22.05.8 and munge 0.5.15 (Debian 12); pitfalls and
their fixes in the comments below.

API:
    lab = SlurmLab.for_owner("lab", address="10.77.0.1", nodes=[NodeDef(...)], port=6817)
    lab.start()            # munged + slurmctld; returns when slurmctld answers
    lab.start_slurmds({"n1": host.pid})   # or the slurm_node role, over SSH
    lab.scontrol("show", "nodes")
    lab.stop()             # SIGTERM all at once, then what is left (idempotent)
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rackcert.core.errors import RackcertError
from rackcert.core.slurm import client as slurm_client
from rackcert.lab.pids import pid_alive

RUN_ROOT = Path("/run/rackcert-slurm")
MUNGED = "/usr/sbin/munged"
SLURMCTLD = "/usr/sbin/slurmctld"
SLURMD = "/usr/sbin/slurmd"
DEBIAN_PACKAGES = "slurmctld slurmd slurm-client munge libpmix-dev"


class SlurmLabError(RackcertError):
    """The lab's Slurm could not start or stop; the message says which daemon and why."""


@dataclass(frozen=True)
class NodeDef:
    """One node line of the lab's slurm.conf."""

    name: str
    address: str
    cpus: int = 1
    memory_mb: int = 1000
    gres: str | None = None  # e.g. "gpu:a100:2"


@dataclass
class SlurmLab:
    """One lab's Slurm controller side: paths, ports and names, all per owner."""

    owner: str
    address: str  # the controller's address on the nodes' bridge
    nodes: list[NodeDef]
    port: int = 6817
    slurmd_port: int = 6818
    cluster: str = "lab"
    partition: str = "lab"
    # The default partition's nodes (empty: every node), and partitions beside it (name ->
    # nodes): one controller can serve two views of its nodes, as the tests' one Slurm rack
    # does (a 2-node partition for the jobs, a 4-node one for localisation's steps).
    partition_nodes: list[str] = field(default_factory=list)
    partitions: dict[str, list[str]] = field(default_factory=dict)
    directory: Path = field(default_factory=Path)
    # Slurm's HealthCheckProgram (the lab writes a no-op there; tests put rackcert's in).
    health_check_interval_s: int = 0
    # SrunPortRange (slurm.conf(5)): the ports srun listens on, for the controller and the
    # steps' slurmstepd, where a firewall sits between them (`rackcert slurm conf` prints the
    # spec's network.firewall.srun_port_range for it). Empty: ports the kernel picks.
    srun_port_range: str = ""

    @classmethod
    def for_owner(cls, owner: str, **kwargs: Any) -> SlurmLab:
        lab = cls(owner=owner, **kwargs)
        lab.directory = RUN_ROOT / owner
        return lab

    # -- names and paths -------------------------------------------------------------------
    @property
    def controller_name(self) -> str:
        """The controller's hostname (inside its own UTS namespace only)."""
        return f"rcctl-{self.owner}"[:60]

    @property
    def conf(self) -> Path:
        return self.directory / "slurm.conf"

    @property
    def health_check_program(self) -> Path:
        return self.directory / "health-check"

    @property
    def prolog(self) -> Path:
        return self.directory / "prolog"

    @property
    def jobcomp_log(self) -> Path:
        """jobcomp/filetxt's log: JobId=... JobState=... per finished job."""
        return self.directory / "jobcomp.log"

    @property
    def munge_key(self) -> Path:
        return self.directory / "munge.key"

    @property
    def munge_socket(self) -> Path:
        return self.directory / "munge" / "munge.socket"

    def env(self) -> dict[str, str]:
        """What a Slurm client (srun, sinfo, scontrol) needs to talk to this lab."""
        return {"SLURM_CONF": str(self.conf)}

    # -- configuration ---------------------------------------------------------------------
    def slurm_conf(self) -> str:
        """The lab's slurm.conf: the site part (what rackcert does not own on a real rack)
        plus the node and partition lines."""
        d = self.directory
        gres = any(n.gres for n in self.nodes)
        lines = [
            "# The rackcert lab's Slurm (rackcert lab up --slurm); per lab, under " + str(d),
            f"ClusterName={self.cluster}",
            f"SlurmctldHost={self.controller_name}({self.address})",
            f"SlurmctldPort={self.port}",
            f"SlurmdPort={self.slurmd_port}",
            *([f"SrunPortRange={self.srun_port_range}"] if self.srun_port_range else []),
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            # Bind the bridge address only, so labs side by side never share a socket.
            "CommunicationParameters=NoCtldInAddrAny",
            f"StateSaveLocation={d}/ctld-state",
            f"SlurmctldPidFile={d}/slurmctld.pid",
            f"SlurmctldLogFile={d}/slurmctld.log",
            # Per node (the nodes share /run): spool, pid and log carry the node's name.
            f"SlurmdSpoolDir={d}/slurmd-%n",
            f"SlurmdPidFile={d}/slurmd-%n.pid",
            f"SlurmdLogFile={d}/slurmd-%n.log",
            # PMIx's step daemons of two nodes collide on /tmp/spmix_appdir_*: TmpFS per node.
            f"TmpFS={d}/tmp-%n",
            # The lab's nodes are namespaces of one machine: they have its CPUs and memory,
            # not the template's; the configured values count.
            "SlurmdParameters=config_overrides",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "MpiDefault=none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "SchedulerType=sched/backfill",
            "ReturnToService=2",
            "SlurmdTimeout=30",
            # A step's launch waits for the node's Prolog (rackcert's health check, a Python
            # start and its checks: seconds, more on a loaded 2-core machine). slurm.conf(5):
            # MessageTimeout, "Time permitted for a round-trip communication to complete",
            # default 10 s; past it srun gives up with "Socket timed out on send/recv
            # operation" instead of the Prolog's verdict. Sites with a health-check Prolog
            # raise it the same way.
            "MessageTimeout=60",
            "InactiveLimit=0",
            "KillWait=5",
            "MinJobAge=300",  # finished jobs stay visible to scontrol for 5 minutes
            "MailProg=/bin/true",
            # Each finished job's end state, one line a job (slurm.conf(5), JobCompType):
            # the lab runs no slurmdbd, so sacct has nothing; this log is what tells a job
            # that ended COMPLETED from one CANCELLED, FAILED or NODE_FAIL once it is gone.
            "JobCompType=jobcomp/filetxt",
            f"JobCompLoc={self.jobcomp_log}",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
        ]
        if gres:
            lines.append("GresTypes=gpu")
        if self.health_check_interval_s:
            lines += [
                f"HealthCheckProgram={self.health_check_program}",
                f"HealthCheckInterval={self.health_check_interval_s}",
                "HealthCheckNodeState=ANY",
                f"Prolog={self.prolog}",
            ]
        for n in self.nodes:
            line = f"NodeName={n.name} NodeAddr={n.address} CPUs={n.cpus} RealMemory={n.memory_mb}"
            lines.append(line + (f" Gres={n.gres}" if n.gres else "") + " State=UNKNOWN")
        names = ",".join(self.partition_nodes or [n.name for n in self.nodes])
        lines.append(
            f"PartitionName={self.partition} Nodes={names} Default=YES MaxTime=INFINITE State=UP"
        )
        for name, members in self.partitions.items():
            lines.append(
                f"PartitionName={name} Nodes={','.join(members)} MaxTime=INFINITE State=UP"
            )
        return "\n".join(lines) + "\n"

    def _write_files(self) -> None:
        d = self.directory
        # munged refuses a socket directory of mode 0700 ("execute permissions for all
        # required"): 0711 on it and on every directory above it that we create.
        for path in (RUN_ROOT, d, d / "munge", d / "ctld-state"):
            path.mkdir(parents=True, exist_ok=True)
            path.chmod(0o711)
        for n in self.nodes:
            (d / f"tmp-{n.name}").mkdir(exist_ok=True)
            (d / f"slurmd-{n.name}").mkdir(exist_ok=True)
        if not self.munge_key.is_file():
            self.munge_key.write_bytes(os.urandom(128))
        self.munge_key.chmod(0o400)
        self.conf.write_text(self.slurm_conf())
        for program in (self.health_check_program, self.prolog):
            if self.health_check_interval_s and not program.exists():
                program.write_text("#!/bin/sh\nexit 0\n")
                program.chmod(0o755)
        hosts = f"127.0.0.1\tlocalhost\n{self.address}\t{self.controller_name}\n"
        hosts += "".join(f"{n.address}\t{n.name}\n" for n in self.nodes)
        (d / "ctld-hosts").write_text(hosts)
        (d / "lab.json").write_text(json.dumps(self.to_dict(), indent=2))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["directory"] = str(self.directory)
        return data

    @classmethod
    def load(cls, owner: str) -> SlurmLab | None:
        """The lab recorded by `start` for `owner`, if any."""
        try:
            data = json.loads((RUN_ROOT / owner / "lab.json").read_text())
            data["nodes"] = [NodeDef(**n) for n in data["nodes"]]
            data["directory"] = Path(data["directory"])
            return cls(**data)
        except (OSError, ValueError, TypeError, KeyError):
            return None

    # -- daemons ---------------------------------------------------------------------------
    def start(self, *, timeout: float = 20.0) -> None:
        """Start munged and slurmctld; return when slurmctld answers `scontrol ping`.

        Restarts cleanly: what an earlier start of this owner left is stopped first.
        """
        for tool in (MUNGED, SLURMCTLD, "scontrol", "unshare"):
            if not shutil.which(tool):
                raise SlurmLabError(f"{tool} not found: apt-get install {DEBIAN_PACKAGES}")
        self.stop()
        self._write_files()
        d = self.directory
        self._spawn(
            [MUNGED, f"--socket={self.munge_socket}", f"--key-file={self.munge_key}",
             f"--pid-file={d}/munged.pid", f"--log-file={d}/munged.log",
             f"--seed-file={d}/munged.seed", "--force"],
            "munged",
        )  # fmt: skip
        self._wait(lambda: self.munge_socket.exists(), "munged", timeout, d / "munged.log")
        # slurmctld finds itself through gethostname(): its own UTS namespace with the
        # controller's name and a hosts file (bind-mounted in its own mount namespace).
        script = (
            f"hostname {shlex.quote(self.controller_name)} && "
            f"mount --bind {shlex.quote(str(d / 'ctld-hosts'))} /etc/hosts && "
            f"exec {SLURMCTLD} -f {shlex.quote(str(self.conf))} -i"
        )
        self._spawn(
            ["unshare", "--uts", "--mount", "--propagation", "private", "sh", "-c", script],
            "slurmctld",
        )
        self._wait(self.controller_up, "slurmctld", timeout, d / "slurmctld.log")

    def start_slurmds(self, nodes: dict[str, int], *, timeout: float = 30.0) -> float:
        """Start each node's slurmd in the namespaces of process `pid` (node name -> pid, an
        SSH test host's first process): its network namespace, so that slurmd listens on the
        node's own address and what filters the node's traffic (its firewalld) filters
        slurmd's too; its mount and UTS namespaces, as the slurm_node role's slurmd runs.
        Return when every node is idle: the seconds that took.

        slurm.conf(5): slurmd listens on SlurmdPort (6818) on every address; the controller
        reaches it at the node's NodeAddr. `-N` names the node (slurmd(8)); `-D` keeps it in
        the foreground, so this lab's `stop` ends it as it ends the controller.
        """
        for name, pid in nodes.items():
            prepare_node(pid)
            argv = [SLURMD, "-D", "-f", str(self.conf), "-N", name]
            self._spawn(["nsenter", "-t", str(pid), "-n", "-m", "-u", "--", *argv],
                        f"slurmd-{name}")  # fmt: skip
        return self.wait_idle(list(nodes), timeout=timeout)

    def _spawn(self, argv: list[str], name: str) -> None:
        log = open(self.directory / f"{name}.out", "ab")  # noqa: SIM115 - handed to the child
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", **_owner_tag()},
            )
        finally:
            log.close()
        (self.directory / f"{name}.launcher.pid").write_text(str(proc.pid))

    def _wait(self, ready: Any, name: str, timeout: float, log: Path) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            time.sleep(0.05)
        tail = _tail(log) or _tail(self.directory / f"{name}.out")
        self.stop()
        raise SlurmLabError(f"lab Slurm: {name} did not come up in {timeout:.0f} s: {tail}")

    def controller_up(self) -> bool:
        """slurmctld accepts connections on its address and port."""
        try:
            with socket.create_connection((self.address, self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def scontrol(self, *args: str, timeout: float = 10) -> subprocess.CompletedProcess[str]:
        return slurm_client.scontrol(*args, conf=str(self.conf), timeout=timeout)

    def client(
        self, tool: str, *args: str, timeout: float = 10
    ) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command (sinfo, scontrol, squeue...) against this lab: the
        spine's run_client, as the health check and the roll run them."""
        return slurm_client.run_client(tool, *args, conf=str(self.conf), timeout=timeout)

    def node_states(self) -> dict[str, str]:
        """Each node's state as sinfo prints it (idle, alloc, drain, down*...)."""
        return slurm_client.short_states(conf=str(self.conf), timeout=10)

    def wait_idle(self, names: list[str], timeout: float = 30.0) -> float:
        """Wait until every named node is idle; returns the seconds it took."""
        start = time.monotonic()
        states: dict[str, str] = {}
        while time.monotonic() - start < timeout:
            states = self.node_states()
            if all(states.get(n) == "idle" for n in names):
                return time.monotonic() - start
            time.sleep(0.1)
        raise SlurmLabError(f"lab Slurm: nodes not idle after {timeout:.0f} s: {states}")

    def stop(self) -> None:
        """SIGTERM every daemon of this lab at once, then SIGKILL what is left. Idempotent.

        The slurmds of the nodes are found by their pid files here (SlurmdPidFile=...-%n).
        """
        d = self.directory
        if not d.is_dir():
            return
        pids = [p for p in (_pid_of(f) for f in d.glob("*.pid")) if p]
        pids += [p for p in (_pid_of(f) for f in d.glob("*.launcher.pid")) if p]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
            time.sleep(0.05)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for f in [*d.glob("*.pid")]:
            f.unlink(missing_ok=True)

    def remove(self) -> None:
        """Stop, then delete the lab's directory (key, state, logs)."""
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


def prepare_node(pid: int) -> None:
    """Make sure a node (an SSH test host, `pid` its first process) has the machine's cgroup
    mounts, which slurmd 22.05 needs ("No filesystem mounted on /sys/fs/cgroup"; a bare
    cgroup2 where the machine runs v1 hierarchies: "Hybrid mode is not supported").

    Hosts get them at start (rackcert.lab.sshhosts); this repeats them for a host started
    without, in the node's own mount namespace only.
    """
    from rackcert.lab.sshhosts.rootfs import cgroup_mount_commands

    script = ["set -e", "grep -q ' /sys/fs/cgroup ' /proc/self/mounts && exit 0"]
    script += cgroup_mount_commands()
    proc = subprocess.run(
        ["nsenter", "-t", str(pid), "-m", "--", "sh", "-c", "\n".join(script)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SlurmLabError(f"cannot mount cgroups in node (pid {pid}): {proc.stderr.strip()}")


def _owner_tag() -> dict[str, str]:
    """The run's owner tag (rackcert.lab.lifetime), kept in the daemons' clean environment:
    a run that dies leaves a controller the next run can tell is its."""
    tag = os.environ.get("RACKCERT_LAB_OWNER")
    return {"RACKCERT_LAB_OWNER": tag} if tag else {}


def _pid_of(path: Path) -> int | None:
    try:
        pid = int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if pid_alive(pid) else None


def _tail(path: Path, lines: int = 3) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


# -- the lab's Slurm, from the lab spec ---------------------------------------------------------
LAB_SLURM_SPEC = "lab-slurm.yaml"


def lab_owner(spec: Any) -> str:
    """The lab's Slurm is per lab spec: /run/rackcert-slurm/lab-<rack>/."""
    return f"lab-{spec.metadata.name}"


def start_lab_slurm(spec_path: Path, spec: Any, workdir: Path) -> tuple[SlurmLab, Path]:
    """`rackcert lab up --slurm`: munged and slurmctld for the lab spec's VMs, on the bridge
    address of their /24 (created now if no host runs yet), and the lab spec with its
    `slurm` block pointing at them, written beside the lab's other files.

    Returns the lab and the path of that spec (what configure, bench and demo --slurm read).
    """
    import ipaddress

    import yaml

    from rackcert.core.errors import InputError
    from rackcert.core.slurm.conf import node_lines
    from rackcert.lab.sshhosts.network import LAB_OWNER, ensure_bridge

    if not spec.vms:
        raise InputError("lab up --slurm: the lab spec has no vms to be Slurm nodes")
    nets = {ipaddress.IPv4Network(f"{vm.address}/24", strict=False) for vm in spec.vms}
    if len(nets) != 1:
        raise InputError(f"lab VM addresses must share one /24, got {sorted(map(str, nets))}")
    net = nets.pop()
    ensure_bridge(str(net), LAB_OWNER)  # the guest agent's hosts join it
    nodes = [NodeDef(n.name, n.address, n.cpus, n.memory_mb) for n in node_lines(spec, gres=False)]
    lab = SlurmLab.for_owner(
        lab_owner(spec),
        address=str(net.network_address + 1),
        nodes=nodes,
        cluster=spec.metadata.name,
        partition=spec.metadata.name,
    )
    lab.start()
    data = yaml.safe_load(Path(spec_path).read_text())
    data["slurm"] = spec_block(lab)
    out = workdir / LAB_SLURM_SPEC
    workdir.mkdir(parents=True, exist_ok=True)
    head = (
        "# Written by `rackcert lab up --slurm`: the lab spec with its slurm block, pointing"
        " at the lab's\n# controller. Removed by `rackcert lab down`.\n"
    )
    out.write_text(head + yaml.safe_dump(data, sort_keys=False))
    return lab, out


def stop_lab_slurm(spec: Any, workdir: Path) -> bool:
    """Stop the lab's Slurm and remove its files; True when one was there."""
    lab = SlurmLab.load(lab_owner(spec))
    (workdir / LAB_SLURM_SPEC).unlink(missing_ok=True)
    if lab is None:
        return False
    lab.remove()
    return True


def spec_block(lab: SlurmLab, **more: Any) -> dict[str, Any]:
    """The spec's slurm block that points at a lab's controller (lab up, tests, benchmarks)."""
    return {
        "controller": {"address": lab.address, "port": lab.port},
        "cluster": lab.cluster,
        "partition": lab.partition,
        "munge_key_file": str(lab.munge_key),
        "munge_socket": str(lab.munge_socket),
        "conf_file": str(lab.conf),
        "client_conf": str(lab.conf),
        "slurmd_port": lab.slurmd_port,
        **more,
    }
