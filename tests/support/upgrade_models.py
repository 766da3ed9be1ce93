"""In-memory models of what the roll talks to, for its unit tests: Slurm's node states, a
vCenter's VMs and hosts, the guests and their validate, on one simulated clock.

They model the real behaviour the roll depends on, not rackcert's code:
- Slurm (sinfo(1) NODE STATE CODES; scontrol(1) update): DRAIN on a node with jobs is
  DRAINING until the jobs end, then DRAINED; a drained node gets no new job; `resume`
  clears DRAIN and the reason; the reason is whatever the last drain set. A job stream
  keeps submitting short jobs to in-service nodes, and a VM shut down under a running job
  kills it (NODE_FAIL), which the tests assert never happens.
- vCenter: ShutdownGuest returns at once and the guest goes off later (or never, for a
  guest whose Tools do not answer); EnterMaintenanceMode of a host with a powered-on VM
  does not complete (no DRS can move a passthrough VM: here it is refused); a reboot is
  accepted before the host goes down, then bootTime moves later; vLCM's apply needs
  maintenance mode.
- The host image: what is installed is not what runs until the host reboots. `esxcli
  software profile update` stages the new image's VIBs for the next boot ("Reboot Required:
  true" in its result; VMware's esxcli software reference), and vLCM's remediation reboots the
  host itself before its task ends. So `images` is the running image and `installed` the one
  the next boot runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rackcert.upgrade.ports import Certificate, NodeState, PortError


class SimClock:
    def __init__(self) -> None:
        self.t = 0.0
        self.tickers: list = []

    def monotonic(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += max(seconds, 0.01)
        for tick in self.tickers:
            tick(self.t)


@dataclass
class Job:
    id: int
    node: str
    ends: float
    state: str = "RUNNING"


@dataclass
class SimNode:
    name: str
    partitions: tuple[str, ...]
    drain: bool = False
    reason: str = ""
    down: bool = False
    jobs: list[Job] = field(default_factory=list)


class SimSlurm:
    kind = "slurm"

    def __init__(
        self,
        clock: SimClock,
        nodes: list[str],
        partition: str = "rack",
        *,
        job_every: float = 1.0,
        job_length: float = 3.0,
    ):
        self.clock = clock
        self.table = {n: SimNode(n, (partition,)) for n in nodes}
        self.jobs: list[Job] = []
        self.job_every, self.job_length = job_every, job_length
        self.next_job = 0.0
        self.stream = True
        self.max_out: dict[str, int] = {}
        self.calls: list[tuple[str, str]] = []
        clock.tickers.append(self.tick)

    # the model's own clock work: jobs end, the stream submits
    def tick(self, now: float) -> None:
        for job in self.jobs:
            if job.state == "RUNNING" and job.ends <= now:
                job.state = "COMPLETED"
                self.table[job.node].jobs.remove(job)
        while self.stream and self.next_job <= now:
            free = sorted(
                (n for n in self.table.values() if not n.drain and not n.down),
                key=lambda n: (len(n.jobs), n.name),
            )
            if free:
                self.submit(free[0].name, self.job_length)
            self.next_job += self.job_every
        self.note_out()

    def submit(self, node: str, length: float) -> Job:
        target = self.table[node]
        assert not target.drain and not target.down, f"job placed on {node}, not in service"
        job = Job(len(self.jobs) + 1, node, self.clock.t + length)
        self.jobs.append(job)
        target.jobs.append(job)
        return job

    def note_out(self) -> None:
        out: dict[str, int] = {}
        for n in self.table.values():
            state = self.state(n)
            if not state.in_service and not (n.drain and not n.reason.startswith("rackcert")):
                for p in n.partitions:
                    out[p] = out.get(p, 0) + 1
        for p, k in out.items():
            self.max_out[p] = max(self.max_out.get(p, 0), k)

    def state(self, n: SimNode) -> NodeState:
        base = "DOWN" if n.down else ("MIXED" if n.jobs else "IDLE")
        return NodeState(n.name, base, n.drain, len(n.jobs), n.reason, n.partitions)

    def vm_went_down(self, node: str) -> None:
        """The VM under a Slurm node went off: its running jobs die (NODE_FAIL)."""
        target = self.table[node]
        for job in list(target.jobs):
            job.state = "NODE_FAIL"
            target.jobs.remove(job)
        target.down = True

    def vm_came_up(self, node: str) -> None:
        self.table[node].down = False

    # the port
    def nodes(self, names: list[str]) -> dict[str, NodeState]:
        self.note_out()
        return {n: self.state(self.table[n]) for n in names}

    def drain(self, node: str, reason: str) -> None:
        self.calls.append(("drain", node))
        target = self.table[node]
        target.drain, target.reason = True, reason

    def resume(self, node: str) -> None:
        self.calls.append(("resume", node))
        target = self.table[node]
        target.drain, target.reason = False, ""

    def set_reason(self, node: str, reason: str) -> None:
        self.calls.append(("set_reason", node))
        target = self.table[node]
        target.drain, target.reason = True, reason


class SimVcenter:
    def __init__(
        self, clock: SimClock, slurm: SimSlurm, placement: dict[str, str], image: dict[str, str]
    ):
        self.clock, self.slurm = clock, slurm
        self.host_of = dict(placement)
        self.power = {vm: "poweredOn" for vm in placement}
        self.off_at: dict[str, float] = {}
        self.tools_dead: set[str] = set()
        self.maintenance: dict[str, bool] = {h: False for h in set(placement.values())}
        self.marks: dict[str, str] = {}
        self.boot = {h: 1000.0 for h in self.maintenance}
        self.down_until: dict[str, float] = {}
        self.images = {h: dict(image) for h in self.maintenance}  # running
        self.installed = {h: dict(image) for h in self.maintenance}  # what the next boot runs
        self.events: list[tuple[float, str, str]] = []
        self.shutdown_s, self.reboot_s = 2.0, 5.0
        clock.tickers.append(self.tick)

    def tick(self, now: float) -> None:
        for vm, when in list(self.off_at.items()):
            if when <= now:
                self._off(vm)
                del self.off_at[vm]

    def _off(self, vm: str) -> None:
        self.power[vm] = "poweredOff"
        self.slurm.vm_went_down(vm)
        self.events.append((self.clock.t, "off", vm))

    def power_state(self, vm: str) -> str:
        return self.power[vm]

    def shutdown_guest(self, vm: str) -> None:
        if self.power[vm] != "poweredOn":
            raise PortError(f"{vm}: InvalidPowerState")
        if vm not in self.tools_dead:
            self.off_at[vm] = self.clock.t + self.shutdown_s
        self.events.append((self.clock.t, "shutdown", vm))

    def power_off(self, vm: str) -> None:
        self.events.append((self.clock.t, "power_off", vm))
        self._off(vm)

    def power_on(self, vm: str) -> None:
        host = self.host_of[vm]
        if self.maintenance[host]:
            raise PortError(f"{vm}: host {host} is in maintenance mode")
        self.power[vm] = "poweredOn"
        self.slurm.vm_came_up(vm)
        self.events.append((self.clock.t, "on", vm))

    def enter_maintenance(self, host: str, run: str) -> None:
        on = [vm for vm, h in self.host_of.items() if h == host and self.power[vm] == "poweredOn"]
        if on:
            raise PortError(f"{host}: powered-on VMs {on} keep it from maintenance mode")
        self.marks[host] = f"entered by {run}"
        self.maintenance[host] = True
        self.events.append((self.clock.t, "maintenance", host))

    def exit_maintenance(self, host: str) -> None:
        self.maintenance[host] = False
        self.marks.pop(host, None)
        self.events.append((self.clock.t, "exit", host))

    def marked_hosts(self) -> list[str]:
        return sorted(self.marks)

    def _up(self, host: str) -> bool:
        return self.clock.t >= self.down_until.get(host, 0.0)

    def boot_time(self, host: str) -> str:
        if not self._up(host):
            raise PortError(f"{host}: not responding")
        return (
            f"2026-01-01T00:{int(self.boot[host]) // 60 % 60:02d}:{int(self.boot[host]) % 60:02d}Z"
        )

    def reboot(self, host: str) -> None:
        if not self.maintenance[host]:
            raise PortError(f"{host}: RebootHost needs maintenance mode")
        self.down_until[host] = self.clock.t + self.reboot_s
        self.boot[host] = self.boot[host] + 60  # later by a minute, whatever the clock says
        self.images[host] = dict(self.installed[host])  # the boot runs what is installed
        self.events.append((self.clock.t, "reboot", host))


class SimHostImage:
    def __init__(self, vc: SimVcenter):
        self.vc = vc
        self.fail: set[str] = set()

    def current(self, host: str) -> dict[str, str]:
        return dict(self.vc.images[host])

    def apply(self, host: str, versions: dict[str, str]) -> None:
        if not self.vc.maintenance[host]:
            raise PortError(f"{host}: vLCM apply needs the host in maintenance mode")
        if host in self.fail:
            raise PortError(f"{host}: vLCM apply task failed (planted)")
        self.vc.installed[host].update(versions)  # staged: runs after the next boot
        if self.reboots:  # vLCM's remediation reboots the host itself before its task ends
            self.vc.boot[host] += 60
            self.vc.images[host] = dict(self.vc.installed[host])
            self.vc.events.append((self.vc.clock.t, "remediation reboot", host))

    reboots = False


class SimGuests:
    """The nodes' software and what their validate reports (checks and a compute figure)."""

    def __init__(self, vc: SimVcenter, versions: dict[str, str]):
        self.vc = vc
        self.versions = {vm: dict(versions) for vm in vc.host_of}
        self.initial = {vm: dict(versions) for vm in vc.host_of}
        self.broken_install: set[str] = set()
        self.half_rate: set[str] = set()
        self.applied: list[str] = []
        # What a node shows after the roll changed it (each a planted regression):
        self.rate_after: dict[str, float] = {}  # its compute rate
        self.check_fails_after: dict[str, str] = {}  # a check that passed before, failing
        self.figure_gone_after: dict[str, str] = {}  # a figure the stage no longer gives
        self.extra_figures: dict[str, dict[str, tuple[float, float]]] = {}  # (before, after)
        self.unreachable: set[str] = set()  # its validate cannot reach it

    def apply(self, node: str, versions: dict[str, str]) -> None:
        if self.vc.power[node] != "poweredOn":
            raise PortError(f"{node}: unreachable over SSH")
        self.applied.append(node)
        if node in self.broken_install:
            raise PortError(
                f"{node}: nvidia-driver {versions.get('nvidia_driver')} failed to install"
            )
        self.versions[node].update(versions)

    def certificate(self, node: str) -> Certificate:
        after = self.versions[node]
        changed = after != self.initial[node]
        rate = 100.0
        if node in self.half_rate and changed:
            rate = 50.0  # the node came back at half its compute rate
        if node in self.rate_after and changed:
            rate = self.rate_after[node]
        # the lab lacks NVLink; chrony keeps the clock synchronised (validation's time.sync)
        checks = {"gpu.count": "pass", "gpu.nvlink": "fail", "time.sync": "pass"}
        if node in self.check_fails_after and changed:
            checks[self.check_fails_after[node]] = "fail"
        figures = {"node.compute": rate}
        for name, (old, new) in self.extra_figures.get(node, {}).items():
            figures[name] = new if changed else old
        if node in self.figure_gone_after and changed:
            figures.pop(self.figure_gone_after[node])
        return Certificate(
            versions=dict(after), checks=checks, figures=figures, floors={"node.compute": 40.0}
        )


class SimCertifier:
    """The node's validate and per-node stage (`certify`), and the start run's record of the
    nodes (`baseline`): by default what they show now, as a run on an idle rack recorded it;
    `start` replaces a node's record (a start run without its validate, or one that did not
    localise and so has no figures)."""

    def __init__(self, guests: SimGuests):
        self.guests = guests
        self.certified: list[str] = []
        self.start: dict[str, Certificate] = {}

    def baseline(self, nodes: list[str]) -> dict[str, Certificate]:
        return {n: self.start.get(n, self.guests.certificate(n)) for n in nodes}

    def certify(self, node: str, versions: dict[str, str]) -> Certificate:
        if self.guests.vc.power[node] != "poweredOn" or node in self.guests.unreachable:
            raise PortError(f"{node}: unreachable")
        self.certified.append(node)
        return self.guests.certificate(node)
