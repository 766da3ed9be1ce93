"""The roll: one state machine per host and its VMs, wave by wave, within the budget.

Per host (its nodes go out together): drain each node with the reason `rackcert upgrade
<run>`; wait until Slurm shows them DRAINED (no job), with a timeout and a policy (wait,
skip the host, stop the roll); shut each guest down through Tools (PowerOff only after a
timeout, recorded); when the host image changes, enter maintenance with rackcert's mark,
apply the image, reboot (a later bootTime proves it), exit maintenance; power the VMs on;
apply the guest layer; certify each node and resume it only when the new versions are
observed and nothing got worse than its baseline. A node that fails stays drained with
the finding in its reason; after --max-failures failures the roll stops and the hosts
not reached are never touched.

    roll = Roll(plan, run, ports, Timing(), data=None)
    data = roll.run()
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, Literal, TypeVar

from rackcert.core.errors import InputError, RackcertError
from rackcert.core.runs import RunDir
from rackcert.core.stage_records import (
    UpgradeChange,
    UpgradeData,
    UpgradeHost,
    UpgradeLeftAlone,
    UpgradeNode,
)
from rackcert.core.upgrade_layers import (
    DRAIN,
    MEASURE,
    NODE_ENDS,
    NODE_POWERED_ON,
    NODE_VALIDATING,
    POWER_ON,
    RESUME,
    SHUTDOWN,
    VALIDATE,
    WAIT_DRAINED,
    Layer,
    layers,
    window_states,
)
from rackcert.upgrade.budget import Unit, cost
from rackcert.upgrade.judge import (
    PASSED,
    SETTLING,
    judge,
    only_settling,
    rack_medians,
    set_aside,
    unmeasured_before,
)
from rackcert.upgrade.plan import UpgradePlan
from rackcert.upgrade.ports import (
    Certificate,
    Certifier,
    Clock,
    Guest,
    HostImage,
    Hypervisor,
    NodeState,
    PortError,
    RealClock,
    Scheduler,
    drain_reason,
)
from rackcert.upgrade.record import Recorder

TERMINAL = NODE_ENDS
Policy = Literal["wait", "skip", "stop"]
T = TypeVar("T")


@dataclass
class Ports:
    """The roll's ports. A layer's own port is the attribute it names (Layer.port), or
    an entry of `layers` for a layer registered from outside."""

    scheduler: Scheduler
    hypervisor: Hypervisor
    guest: Guest
    certifier: Certifier
    host_image: HostImage | None = None
    clock: Clock = field(default_factory=RealClock)
    layers: dict[str, Any] = field(default_factory=dict)

    def port(self, name: str) -> Any:
        return self.layers[name] if name in self.layers else getattr(self, name, None)


@dataclass
class _Context:
    """What a layer's step is given (rackcert.core.upgrade_layers.StepContext)."""

    roll: Roll
    layer: Layer
    where: str
    target: dict[str, str]
    prefix: str = ""  # "rollback " on a rollback's chain: its steps' names

    @property
    def run(self) -> str:
        return self.roll.run_name

    @property
    def port(self) -> Any:
        return self.roll.ports.port(self.layer.port)

    @property
    def hypervisor(self) -> Hypervisor:
        return self.roll.ports.hypervisor

    def apply(self) -> str:
        return self.roll._apply(self.layer, self.where, self.target)

    def reboot(self) -> str:
        return self.roll._reboot(self.where)

    def remember_boot_time(self, until: str) -> None:
        self.roll._remember_boot_time(self.where, self.prefix + until)


@dataclass(frozen=True)
class Timing:
    drain_timeout: float = 3600.0
    drain_policy: Policy = "wait"
    shutdown_timeout: float = 300.0
    reboot_timeout: float = 1800.0
    budget_timeout: float = 3600.0
    poll: float = 5.0
    median_fraction: float = 0.7
    settle_timeout: float = 120.0  # judge.SETTLING: how long a fresh boot may take to settle


class StopRoll(Exception):
    """The roll stops here (a policy, the budget, --max-failures); the message says why."""


class UnitFailed(Exception):
    def __init__(self, step: str, message: str):
        super().__init__(f"{step}: {message}")
        self.step = step


def new_record(plan: UpgradePlan) -> UpgradeData:
    """The record a fresh roll starts from: every node pending, every host pending."""
    host_of = {n: u.host for u in plan.units for n in u.nodes}
    nodes = [
        UpgradeNode(
            name=n,
            host=host_of.get(n, ""),
            partitions=list(plan.partitions.get(n, ())),
            state="left_alone" if n in plan.left_alone else "pending",
            reason=plan.left_alone.get(n, ""),
            versions_before=plan.versions_before("guest"),
        )
        for n in [*host_of, *(n for n in plan.left_alone if n not in host_of)]
    ]
    hosts = [
        UpgradeHost(
            name=u.host,
            nodes=list(u.nodes),
            state="pending" if plan.host_changes(u.host) else "unchanged",
            image_before=plan.versions_before("host", u.host, read_back=True),
        )
        for u in plan.units
    ]
    order = plan.options.order
    return UpgradeData(
        certified_run=plan.certified_run,
        scheduler=plan.scheduler,  # type: ignore[arg-type]
        max_unavailable=str(plan.options.budget),
        max_failures=plan.options.max_failures,
        order=",".join(order) if order else "spec",
        allow_uncertified=plan.options.allow_uncertified,
        uncertified=list(plan.refusals.uncertified) if plan.options.allow_uncertified else [],
        start_verdict=plan.start.verdict if plan.start is not None else "",
        start_failing=list(plan.start.failing) if plan.start is not None else [],
        allow_uncertified_start=plan.options.allow_uncertified_start,
        changes=[
            UpgradeChange(
                layer=c.layer,
                component=c.component,
                before=c.before,
                after=c.after,
                hosts=list(c.hosts),
            )
            for c in plan.changes
        ],
        waves=[[u.host for u in w] for w in plan.waves],
        nodes=nodes,
        hosts=hosts,
        left_alone=[UpgradeLeftAlone(node=n, reason=r) for n, r in sorted(plan.left_alone.items())],
    )


def _later(a: str, b: str) -> bool:
    """bootTime `a` is later than `b` (ISO 8601; an empty one is never later)."""
    if not a or not b:
        return bool(a) and not b
    return datetime.fromisoformat(a.replace("Z", "+00:00")) > datetime.fromisoformat(
        b.replace("Z", "+00:00")
    )


def _act(action: Callable[[Any], object] | None, ctx: _Context) -> object:
    """A declared step's action on its context (a step without one has nothing to do)."""
    return action(ctx) if action is not None else None


def _each(nodes: list[str], work: Callable[[str], T]) -> list[T]:
    """`work` on every node at once; the first exception is raised once all have ended."""
    if len(nodes) <= 1:
        return [work(n) for n in nodes]
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        futures = [pool.submit(work, n) for n in nodes]
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        raise errors[0]  # type: ignore[misc]
    return [f.result() for f in futures]


class Roll:
    """Drives the plan's waves through the ports, recording every transition."""

    def __init__(
        self,
        plan: UpgradePlan,
        run: RunDir,
        ports: Ports,
        timing: Timing,
        *,
        data: UpgradeData | None = None,
        say: Callable[[str], None] | None = None,
    ):
        self.plan = plan
        self.ports = ports
        self.timing = timing
        self.run_name = run.path.name
        self.rec = Recorder(run, data or new_record(plan))
        self.say = say or (lambda line: None)
        self.medians: dict[str, float] = {}

    # -- the whole roll ------------------------------------------------------------------
    def run(self) -> UpgradeData:
        """Roll every wave; returns the record (status done or stopped)."""
        data = self.rec.data
        for layer in self.plan.changing():
            if self.ports.port(layer.port) is None:
                raise InputError(layer.missing_port())
        with self.rec.editing():
            data.status, data.stopped_because = "running", ""
            # A re-run may raise the limit the record stopped at (--max-failures).
            data.max_failures = self.plan.options.max_failures
        self._recover()
        self._take_medians()
        try:
            for index, wave in enumerate(self.plan.waves, 1):
                todo = [u for u in wave if not self._unit_finished(u)]
                if not todo:
                    continue
                if data.failures >= data.max_failures:
                    raise StopRoll(
                        f"{data.failures} node(s) failed (--max-failures {data.max_failures});"
                        " the hosts not reached are untouched"
                    )
                self.say(f"wave {index}: {', '.join(u.host for u in todo)}")
                self._admit(todo)
                with ThreadPoolExecutor(max_workers=len(todo)) as pool:
                    outcomes = list(pool.map(self._unit, todo))
                stop = [o for o in outcomes if o]
                if stop:
                    raise StopRoll(stop[0])
            with self.rec.editing():
                data.status = "done"
        except StopRoll as exc:
            with self.rec.editing():
                data.status, data.stopped_because = "stopped", str(exc)
            self.say(f"stopped: {exc}")
        return data

    def _unit_finished(self, unit: Unit) -> bool:
        nodes_done = all(self.rec.node(n).state in TERMINAL for n in unit.nodes)
        host = self.rec.host(unit.host)
        return nodes_done and (bool(unit.nodes) or host.state in ("done", "unchanged", "failed"))

    def _recover(self) -> None:
        """Close what an interrupted run left that this record does not hold: a host in
        rackcert's maintenance the record has not started, a node drained by this roll
        the record shows pending."""
        known = {h.name for h in self.rec.data.hosts if h.state in window_states()}
        for host in self.ports.hypervisor.marked_hosts():
            if host in known:
                continue
            self.ports.hypervisor.exit_maintenance(host)
            with self.rec.editing() as data:
                data.notes.append(f"{host}: closed a maintenance window an interrupted run left")
            self.say(f"{host}: taken out of a maintenance window an interrupted run left")
        names = [n.name for n in self.rec.data.nodes]
        states = self.ports.scheduler.nodes(names) if names else {}
        for name, state in states.items():
            node = self.rec.node(name)
            # A drain the record holds (its step started) is the chain's to finish.
            if node.state == "pending" and not node.steps and state.drained_by(self.run_name):
                self.ports.scheduler.resume(name)
                with self.rec.editing() as data:
                    data.notes.append(
                        f"{name}: resumed, drained by this roll before it was recorded"
                    )

    def _take_medians(self) -> None:
        """The rack's median per figure, from the start run's per-node figures (where it
        localised, on an idle rack). Each node's own before is measured in its chain."""
        names = [n.name for n in self.rec.data.nodes]
        self.medians = rack_medians(self.ports.certifier.baseline(names)) if names else {}

    def _measure_before(self, n: str) -> str:
        """The node's own before, measured on it now (drained, idle, its host still up): the
        same validate and per-node stage as after. What cannot be measured fails the step:
        the node stays drained, its host untouched."""
        cert = self.ports.certifier.certify(n, self.plan.versions_before("guest"))
        cert.floors.update(self.plan.floors.get(n, {}))
        with self.rec.editing():
            self.rec.node(n).baseline = cert.to_dict()
        missing = unmeasured_before(cert)
        if missing:
            raise PortError(f"{n}: {'; '.join(missing)}")
        passed = sum(1 for s in cert.checks.values() if s == PASSED)
        shared = (
            f" ({len(cert.reference)} with a reference read on its machine at the same moment)"
            if cert.reference
            else ""
        )
        return f"{passed} check(s) passed, {len(cert.figures)} figure(s) measured{shared}"

    # -- the budget ----------------------------------------------------------------------
    def _out_of_service(self, states: dict[str, NodeState], skip: set[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for name, state in states.items():
            if name in skip or state.in_service or state.operator_drained(self.run_name):
                continue
            for part in self.plan.partitions.get(name, state.partitions):
                out[part] = out.get(part, 0) + 1
        return out

    def _admit(self, units: list[Unit]) -> None:
        """Wait until the wave fits the budget as the scheduler counts it now."""
        wave_nodes = {n for u in units for n in u.nodes}
        all_nodes = [n.name for n in self.rec.data.nodes]
        started = self.ports.clock.monotonic()
        while True:
            states = self.ports.scheduler.nodes(all_nodes)
            out = self._out_of_service(states, wave_nodes)
            need: dict[str, int] = {}
            for unit in units:
                for part, n in cost(unit, self.plan.partitions).items():
                    need[part] = need.get(part, 0) + n
            over = [p for p, n in need.items() if out.get(p, 0) + n > self.plan.limits.get(p, 0)]
            if not over:
                return
            if self.ports.clock.monotonic() - started > self.timing.budget_timeout:
                busy = [n for n, s in states.items() if n not in wave_nodes and not s.in_service]
                raise StopRoll(
                    f"partition {over[0]}: {out.get(over[0], 0)} node(s) already out of service"
                    f" ({', '.join(sorted(busy))}) for {self.timing.budget_timeout:.0f} s;"
                    f" --max-unavailable {self.plan.options.budget} leaves no room"
                )
            self.ports.clock.sleep(self.timing.poll)

    def _sample(self) -> None:
        states = self.ports.scheduler.nodes([n.name for n in self.rec.data.nodes])
        out = self._out_of_service(states, set())

        def raise_max(data: UpgradeData) -> bool:
            seen = data.out_of_service_max
            if not any(n > seen.get(part, 0) for part, n in out.items()):
                return False
            for part, n in out.items():
                seen[part] = max(seen.get(part, 0), n)
            return True

        self.rec.update(raise_max, durable=False)

    # -- one host and its nodes ----------------------------------------------------------
    def _step(
        self,
        target: UpgradeNode | UpgradeHost,
        step: str,
        action: Callable[[], object],
    ) -> None:
        if self.rec.finished(target, step):
            return
        entry = self.rec.begin(target, step)
        try:
            said = action()
            detail = said if isinstance(said, str) else ""
        except (RackcertError, OSError, TimeoutError) as exc:
            self.rec.end(entry, "failed", str(exc))
            raise UnitFailed(step, " ".join(str(exc).split())) from None
        # Written with the next step's `started` (every step is idempotent: one repeated
        # after a kill in between is no harm), a write less per step.
        self.rec.end(entry, "done", detail, durable=False)

    def _set(self, names: list[str] | tuple[str, ...], state: str) -> None:
        """Record the nodes' new state; it reaches the disk with the next step's write (the
        state is the record's summary of the steps, which are written ahead)."""

        def move(_data: UpgradeData) -> bool:
            moved = [n for n in names if self.rec.node(n).state != state]
            for name in moved:
                self.rec.node(name).state = state  # type: ignore[assignment]
            return bool(moved)

        self.rec.update(move, durable=False)

    def _set_host(self, host: str, state: str) -> None:
        def move(_data: UpgradeData) -> bool:
            if self.rec.host(host).state == state:
                return False
            self.rec.host(host).state = state  # type: ignore[assignment]
            return True

        self.rec.update(move, durable=False)

    def _unit(self, unit: Unit, *, rollback: bool = False) -> str:
        """One host's chain; returns why the roll must stop, or '' to go on."""
        prefix = "rollback " if rollback else ""
        try:
            return self._chain(unit, prefix, rollback)
        except UnitFailed as exc:
            self._fail(unit, str(exc))
            return ""

    def _chain(self, unit: Unit, prefix: str, rollback: bool) -> str:
        sched, hv = self.ports.scheduler, self.ports.hypervisor
        nodes = list(unit.nodes)
        reason = drain_reason(self.run_name)
        self._redrain_lost(nodes, prefix, reason)
        for n in nodes:
            self._step(self.rec.node(n), prefix + DRAIN.name, partial(sched.drain, n, reason))
            self._set([n], "draining")
        self._sample()
        self.rec.flush()  # the drain wait may be long: the record shows it meanwhile
        if nodes and not self.rec.finished(self.rec.node(nodes[0]), prefix + WAIT_DRAINED.name):
            outcome = self._wait_drained(nodes)
            if outcome != "drained":
                return self._give_back(unit, outcome)
            for n in nodes:
                self._step(self.rec.node(n), prefix + WAIT_DRAINED.name, lambda: "no job running")
        self._set(nodes, "drained")
        if not rollback:  # a rollback is judged against the forward chain's before

            def before(n: str) -> None:
                self._step(self.rec.node(n), MEASURE.name, partial(self._measure_before, n))

            _each(nodes, before)
        for n in nodes:
            self._step(self.rec.node(n), prefix + SHUTDOWN.name, partial(self._shutdown, n))
        self._set(nodes, "down")
        h = self.rec.host(unit.host)
        host_moved = False
        for layer in layers("host"):
            target = self.plan.target(layer.name, unit.host, rollback=rollback)
            if not target:
                skipped = prefix + layer.steps[0].name if layer.steps else ""
                if skipped and not self.rec.finished(h, skipped):
                    entry = self.rec.begin(h, skipped)
                    self.rec.end(entry, "skipped", f"no {layer.name} layer change for this host")
                continue
            host_moved = True
            self._set(nodes, layer.node_state)
            ctx = _Context(self, layer, unit.host, target, prefix)
            if layer.prepare is not None:
                layer.prepare(ctx)
            for step in layer.steps:
                if step.state:
                    self._set_host(unit.host, step.state)
                self._step(h, prefix + step.name, partial(_act, step.action, ctx))
            if layer.done_state:
                self._set_host(unit.host, layer.done_state)
        for n in nodes:
            self._step(self.rec.node(n), prefix + POWER_ON.name, partial(hv.power_on, n))
        self._set(nodes, NODE_POWERED_ON)
        for layer in layers("guest"):
            target = self.plan.target(layer.name, "", rollback=rollback)
            if not target:
                continue
            self._set(nodes, layer.node_state)

            def guest(n: str, layer: Layer = layer, target: dict[str, str] = target) -> None:
                ctx = _Context(self, layer, n, target)
                for step in layer.steps:
                    self._step(
                        self.rec.node(n), prefix + step.name, partial(_act, step.action, ctx)
                    )

            _each(nodes, guest)  # the host's VMs are independent: side by side
        self._set(nodes, NODE_VALIDATING)
        passed = _each(nodes, lambda n: self._certify(n, prefix, rollback))
        failed = [n for n, ok in zip(nodes, passed, strict=True) if not ok]
        # A host without a host-layer change ends as it began, "unchanged": also after a
        # rollback of a chain whose guest step had failed and marked it "failed", or the
        # record would show a failed host whose image never moved.
        self._set_host(unit.host, "done" if host_moved else "unchanged")
        if failed:
            with self.rec.editing() as data:
                data.failures += len(failed)
        return ""

    def _redrain_lost(self, nodes: list[str], prefix: str, reason: str) -> None:
        """A re-run finds a node this roll drained back in service (an operator resumed it,
        or a scheduler that forgets, like a person asked): drain it again before going on."""
        waiting = [
            n
            for n in nodes
            if self.rec.node(n).state in ("pending", "draining", "drained")
            and self.rec.finished(self.rec.node(n), prefix + DRAIN.name)
        ]
        if not waiting:
            return
        states = self.ports.scheduler.nodes(waiting)
        for n in waiting:
            if not states[n].drained_by(self.run_name):
                self.ports.scheduler.drain(n, reason)
                with self.rec.editing() as data:
                    data.notes.append(
                        f"{n}: drained again (the scheduler no longer had it drained)"
                    )

    def _host_target(self, host: str, rollback: bool) -> dict[str, str]:
        """The versions the host-side layers read back after the reboot move it to."""
        out: dict[str, str] = {}
        for layer in layers("host"):
            if layer.read_back:
                out.update(self.plan.target(layer.name, host, rollback=rollback))
        return out

    def _guest_target(self, rollback: bool) -> dict[str, str]:
        out: dict[str, str] = {}
        for layer in layers("guest"):
            out.update(self.plan.target(layer.name, "", rollback=rollback))
        return out

    def _wait_drained(self, nodes: list[str]) -> str:
        """drained, or the policy's word (skip, stop) once the timeout passed."""
        clock, started = self.ports.clock, self.ports.clock.monotonic()
        warned = 0
        while True:
            states = self.ports.scheduler.nodes(nodes)
            if all(states[n].drained or states[n].down for n in nodes):
                return "drained"
            for n in nodes:
                if states[n].in_service:  # resumed behind the roll's back: out again
                    self.ports.scheduler.drain(n, drain_reason(self.run_name))
                    with self.rec.editing() as data:
                        data.notes.append(f"{n}: resumed while the roll waited; drained again")
            waited = clock.monotonic() - started
            if waited > self.timing.drain_timeout * (warned + 1):
                busy = [n for n in nodes if states[n].draining]
                line = f"{', '.join(busy)} still running jobs after {waited:.0f} s"
                if self.timing.drain_policy != "wait":
                    return f"{self.timing.drain_policy}:{line}"
                warned += 1
                with self.rec.editing() as data:
                    data.notes.append(f"{line}; waiting (--drain-policy wait)")
                self.say(f"{line}; waiting (--drain-policy wait)")
            clock.sleep(self.timing.poll)

    def _give_back(self, unit: Unit, outcome: str) -> str:
        """Skip or stop: resume what this roll drained, untouched otherwise."""
        policy, _, line = outcome.partition(":")
        for n in unit.nodes:
            state = self.ports.scheduler.nodes([n])[n]
            if state.drained_by(self.run_name):
                self.ports.scheduler.resume(n)
            with self.rec.editing():
                node = self.rec.node(n)
                node.state = "skipped" if policy == "skip" else "pending"
                node.reason = f"{line} (--drain-policy {policy})"
                node.steps = [s for s in node.steps if s.step != DRAIN.name]
        if policy == "stop":
            return f"{line}; --drain-policy stop (resumed, untouched)"
        self.say(f"{unit.host}: skipped: {line}")
        return ""

    def _shutdown(self, vm: str) -> str:
        hv, clock = self.ports.hypervisor, self.ports.clock
        if hv.power_state(vm) == "poweredOff":
            return "already powered off"
        try:
            hv.shutdown_guest(vm)
        except (RackcertError, OSError) as exc:
            why = f"ShutdownGuest refused ({' '.join(str(exc).split())})"
        else:
            deadline = clock.monotonic() + self.timing.shutdown_timeout
            while clock.monotonic() < deadline:
                if hv.power_state(vm) == "poweredOff":
                    return "guest shut down through Tools"
                clock.sleep(min(self.timing.poll, 1.0))
            why = f"guest still on {self.timing.shutdown_timeout:.0f} s after ShutdownGuest"
        if hv.power_state(vm) != "poweredOff":
            hv.power_off(vm)
        with self.rec.editing():
            self.rec.node(vm).forced_power_off = True
        return f"powered off: {why}"

    def _apply(self, layer: Layer, host: str, target: dict[str, str]) -> str:
        image = self.ports.port(layer.port)
        assert image is not None  # run() refuses a changing layer without its port
        current = image.current(host)
        if layer.read_back:
            with self.rec.editing():
                self.rec.host(host).image_before = current
        if all(current.get(k) == v for k, v in target.items()):
            return "already at " + ", ".join(f"{k} {v}" for k, v in sorted(target.items()))
        image.apply(host, target)
        return "applied " + ", ".join(f"{k} {v}" for k, v in sorted(target.items()))

    def _remember_boot_time(self, host: str, step: str) -> None:
        h = self.rec.host(host)
        if not self.rec.finished(h, step):
            # Each chain (forward, rollback, a re-run whose image step had not ended) takes
            # its own bootTime before its image step, and its reboot step proves a later
            # one: an image is installed for the next boot (esxcli software) or vLCM's
            # remediation reboots the host itself, and only a reboot after this chain's
            # image runs it. A rollback measured against the forward chain's bootTime
            # found it "rebooted" and ran the old image nowhere.
            boot_time = self._boot_time(host)  # asked before the lock is taken
            if boot_time:
                with self.rec.editing():
                    h.boot_time_before, h.boot_time_after = boot_time, ""

    def _reboot(self, host: str) -> str:
        hv, clock = self.ports.hypervisor, self.ports.clock
        h = self.rec.host(host)
        if not h.boot_time_before:
            boot_time = hv.boot_time(host)
            with self.rec.editing():
                h.boot_time_before = boot_time
        before = h.boot_time_before
        now = self._boot_time(host)
        asked = bool(now) and not _later(now, before)  # up and not rebooted since: reboot it
        if asked:
            hv.reboot(host)
        # Else it rebooted already (vLCM's remediation does) or is down rebooting (a re-run
        # after a kill mid-reboot): wait for the later bootTime that proves it.
        deadline = clock.monotonic() + self.timing.reboot_timeout
        while True:
            now = self._boot_time(host)
            if _later(now, before):
                with self.rec.editing():
                    h.boot_time_after = now
                image = self.ports.host_image
                if image is not None:
                    running = image.current(host)  # a vAPI call: not under the record's lock
                    with self.rec.editing():
                        h.image_after = running
                by = "" if asked else " (rebooted by the image's remediation, or before a re-run)"
                return f"bootTime {before} -> {now}{by}"
            if clock.monotonic() > deadline:
                raise PortError(
                    f"{host}: bootTime still {before} {self.timing.reboot_timeout:.0f} s after"
                    " the reboot was accepted"
                )
            clock.sleep(min(self.timing.poll, 1.0))

    def _boot_time(self, host: str) -> str:
        try:
            return self.ports.hypervisor.boot_time(host)
        except (RackcertError, OSError):
            return ""  # down while it reboots

    def _certify(self, n: str, prefix: str, rollback: bool) -> bool:
        """Validate the node, judge it against its baseline, resume it or keep it drained.
        A node failing only checks that settle after a boot (judge.SETTLING) is measured
        again every poll until Timing.settle_timeout; the last measurement is judged."""
        node = self.rec.node(n)
        entry = self.rec.begin(node, prefix + VALIDATE.name)
        clock = self.ports.clock
        started, again = clock.monotonic(), -1
        while True:
            again += 1
            try:
                cert = self.ports.certifier.certify(n, self._guest_target(rollback))
            except (RackcertError, OSError) as exc:
                self.rec.end(entry, "failed", str(exc))
                self._fail_nodes([n], f"validate: {' '.join(str(exc).split())}")
                return False
            findings = self._judge_after(node, cert, rollback)
            if (
                not only_settling(findings)
                or clock.monotonic() - started >= self.timing.settle_timeout
            ):
                break
            clock.sleep(self.timing.poll)
        return self._resume_or_keep(n, node, entry, cert, findings, prefix, rollback, again)

    def _judge_after(self, node: Any, cert: Certificate, rollback: bool) -> list[str]:
        """The judge's findings on `cert` against the node's before (checks and figures)."""
        return judge(
            Certificate.from_dict(node.baseline),
            cert,
            wanted=self._guest_target(rollback),
            medians=self.medians,
            median_fraction=self.timing.median_fraction,
            changing=frozenset(
                c.component
                for c in self.plan.changes
                if c.layer in {la.name for la in layers("guest")}
            ),
            floors=self.plan.floors.get(node.name, {}),
        )

    def _resume_or_keep(
        self, n: str, node: Any, entry: Any, cert: Certificate, findings: list[str],
        prefix: str, rollback: bool, again: int,
    ) -> bool:  # fmt: skip
        host_wanted = self._host_target(node.host, rollback)
        cert.floors.update(self.plan.floors.get(n, {}))
        findings = list(findings)  # the last measurement's, judged in _certify
        image_after = self.rec.host(node.host).image_after
        # The host image the reboot runs, read back after it: not observed is no pass.
        findings += [
            f"host {node.host} {k} {image_after.get(k) or 'not observed'}, wanted {v}"
            for k, v in sorted(host_wanted.items())
            if image_after.get(k) != v
        ]
        with self.rec.editing():
            node.versions_after = dict(cert.versions)
            node.after = cert.to_dict()
            node.findings = findings
        if findings:
            self.rec.end(entry, "failed", "; ".join(findings))
            self._fail_nodes(
                [n], findings[0] + (f" (+{len(findings) - 1} more)" if len(findings) > 1 else "")
            )
            return False
        aside = set_aside(Certificate.from_dict(node.baseline), cert)
        how = f" ({', '.join(aside)}: its shared machine's, not compared)" if aside else ""
        if again:
            settled = ", ".join(sorted(SETTLING))
            how += f" (measured {again} more time(s) while {settled} settled)"
        self.rec.end(
            entry, "done", f"new versions observed, nothing worse than before the roll{how}"
        )
        self._step(node, prefix + RESUME.name, lambda: self.ports.scheduler.resume(n))
        self._set([n], "rolled_back" if rollback else "resumed")
        with self.rec.editing():
            node.reason = ""
        self.say(f"{n}: {'rolled back' if rollback else 'upgraded'}, certified, resumed")
        return True

    def _fail_nodes(self, names: list[str], finding: str) -> None:
        for n in names:
            reason = drain_reason(self.run_name, finding)
            try:
                self.ports.scheduler.set_reason(n, reason)
            except (RackcertError, OSError) as exc:
                reason += f" (could not set in the scheduler: {exc})"
            with self.rec.editing():
                node = self.rec.node(n)
                node.state, node.reason = "failed", reason
            self.say(f"{n}: FAILED, stays drained: {finding}")

    def _fail(self, unit: Unit, finding: str) -> None:
        """A step of the host's chain failed: its nodes stay drained with the finding, and
        a maintenance window this roll opened is closed (never left in rackcert's own)."""
        h = self.rec.host(unit.host)
        for layer in layers("host"):
            if h.state not in layer.window_states or layer.close is None:
                continue
            ctx = _Context(self, layer, unit.host, {})
            try:
                layer.close(ctx)
                note = f"{unit.host}: {layer.window} closed after the failure"
            except (RackcertError, OSError) as exc:
                note = f"{unit.host}: could not exit {layer.window} after the failure: {exc}"
            with self.rec.editing() as data:
                data.notes.append(note)
        self._set_host(unit.host, "failed")
        open_nodes = [n for n in unit.nodes if self.rec.node(n).state not in TERMINAL]
        self._fail_nodes(open_nodes, finding)
        with self.rec.editing() as data:
            data.failures += len(open_nodes)

    # -- rollback ------------------------------------------------------------------------
    def rollback(self, node: str) -> UpgradeData:
        """Return a failed node's host and all its nodes to the certified versions."""
        try:
            target = self.rec.node(node)
        except KeyError:
            raise InputError(f"--rollback {node}: not a node of this roll") from None
        if target.state in ("pending", "left_alone", "rolled_back"):
            raise InputError(f"--rollback {node}: the roll never changed it (state {target.state})")
        unit = next(u for u in self.plan.units if node in u.nodes)
        self._take_medians()
        with self.rec.editing() as data:
            data.notes.append(f"rollback of {unit.host} ({', '.join(unit.nodes)}) asked")
        stop = self._unit(unit, rollback=True)
        if stop:
            with self.rec.editing() as data:
                data.stopped_because = stop
        return self.rec.data
