"""The plan `rackcert upgrade SPEC --plan` prints, and the roll follows: a pure function.

From the certified run's spec and the new one: the layers that change, their order, the
waves of hosts (each host with its VMs) within the budget, each node's steps, and every
refusal. Given the scheduler's node states (when it can be read), nodes an operator
drained are left alone and their hosts are kept out of the waves.

    plan = build_plan(certified_spec, new_spec, PlanOptions(budget=Budget.parse("1")), ...)
    print("\n".join(plan.lines()))
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from rackcert.core.matrix import Reference
from rackcert.core.placement import PlacementError, place
from rackcert.core.spec import Spec
from rackcert.core.upgrade_layers import (
    ASK,
    DRAIN,
    MEASURE,
    POWER_ON,
    RESUME,
    SHUTDOWN,
    VALIDATE,
    WAIT_DRAINED,
    Change,
    Layer,
    diff,
    layer,
    layers,
    step_proofs,
)
from rackcert.upgrade import refusals as refuse
from rackcert.upgrade.budget import Budget, Unit, order_units, plan_waves, unfreeable
from rackcert.upgrade.layers import uses_vgpu
from rackcert.upgrade.ports import NodeState
from rackcert.upgrade.rules import node_floors
from rackcert.upgrade.start import Start
from rackcert.upgrade.start import refusal as refusal_of_start

SCHEDULERS = {
    "slurm": "Slurm: scontrol drain/resume, squeue for jobs, sinfo for states",
    "hooks": "the spec's upgrade.hooks commands (drain, jobs, resume)",
    "ask": "no scheduler known (no slurm, no upgrade.hooks): the roll ASKS before taking"
    " each node out, and trusts the answer that it runs no job",
}


@dataclass(frozen=True)
class PlanOptions:
    budget: Budget
    order: list[str] | None = None  # node names, ["least-busy"], or None (spec order)
    allow_uncertified: bool = False
    max_failures: int = 1
    allow_uncertified_start: bool = False


@dataclass
class UpgradePlan:
    rack: str
    certified_run: str
    scheduler: str
    options: PlanOptions
    changes: list[Change]
    units: list[Unit]
    partitions: dict[str, tuple[str, ...]]
    limits: dict[str, int]
    waves: list[list[Unit]]
    steps: dict[str, list[str]]
    order_note: str
    refusals: refuse.Refusals
    left_alone: dict[str, str] = field(default_factory=dict)  # node -> who drained it, why
    # layer -> where (a host; "" for a guest-side layer) -> component -> version
    targets: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)
    befores: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)
    floors: dict[str, dict[str, float]] = field(default_factory=dict)  # node -> the spec's rules
    start: Start | None = None  # the start run's verdict (rackcert.upgrade.start)

    def changing(self) -> list[Layer]:
        """The layers this roll moves, in registry order."""
        moved = {c.layer for c in self.changes}
        return [la for la in layers() if la.name in moved]

    def layer_changes(self, name: str, host: str) -> bool:
        """The layer moves on this host (a guest-side layer: on every node)."""
        return any(
            c.layer == name and (layer(name).side == "guest" or host in c.hosts)
            for c in self.changes
        )

    def host_changes(self, host: str) -> bool:
        return any(self.layer_changes(la.name, host) for la in layers("host"))

    def target(self, name: str, where: str, *, rollback: bool = False) -> dict[str, str]:
        """The versions a layer moves `where` to (back to, on a rollback); empty: it does not."""
        if not self.layer_changes(name, where):
            return {}
        table = self.befores if rollback else self.targets
        return dict(table.get(name, {}).get(where if layer(name).side == "host" else "", {}))

    def versions_before(
        self, side: str, where: str = "", *, read_back: bool = False
    ) -> dict[str, str]:
        """The certified versions of one side's layers (host side: of one host)."""
        out: dict[str, str] = {}
        for la in layers(side):  # type: ignore[arg-type]
            if not read_back or la.read_back:
                out.update(self.befores.get(la.name, {}).get(where, {}))
        return out

    def blocking(self) -> list[str]:
        return self.refusals.blocking(
            self.options.allow_uncertified, self.options.allow_uncertified_start
        )

    def lines(self) -> list[str]:
        """The plan for people: layers, order, budget, waves, steps, refusals."""
        out = [f"rack {self.rack}: upgrade from certified run {self.certified_run}"]
        if self.start is not None and (
            self.start.certified or self.options.allow_uncertified_start
        ):
            allowed = "" if self.start.certified else " (allowed: --allow-uncertified-start)"
            out.append(self.start.line() + allowed)
        out.append("layers:" if self.changes else "layers: none (nothing differs)")
        out += [f"  {c.line()}" for c in self.changes]
        out.append(f"order: {self.order_note}")
        out.append(f"scheduler: {SCHEDULERS[self.scheduler]}")
        limits = ", ".join(f"{p} {n}" for p, n in sorted(self.limits.items()))
        out.append(f"budget: --max-unavailable {self.options.budget} ({limits} out at once)")
        out.append(f"max failures: {self.options.max_failures} (nodes not reached stay untouched)")
        for i, wave in enumerate(self.waves, 1):
            hosts = "; ".join(f"{u.host}: {', '.join(u.nodes)}" for u in wave)
            out.append(f"wave {i}: {hosts}")
        for node, why in sorted(self.left_alone.items()):
            out.append(f"left alone: {node} ({why})")
        for node, steps in self.steps.items():
            out.append(f"  {node}: " + " -> ".join(steps))
        proofs = step_proofs()
        used = dict.fromkeys(s for steps in self.steps.values() for s in steps)
        if used:
            out.append("each step done when:")
            out += [f"  {s}: {proofs[s]}" for s in used]
        if self.refusals.uncertified and self.options.allow_uncertified:
            out += [f"uncertified (allowed): {line}" for line in self.refusals.uncertified]
        out += [f"refused: {line}" for line in self.blocking()]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "rack": self.rack,
            "certified_run": self.certified_run,
            "scheduler": self.scheduler,
            "changes": [c.__dict__ | {"hosts": list(c.hosts)} for c in self.changes],
            "order": self.order_note,
            "budget": str(self.options.budget),
            "limits": self.limits,
            "waves": [[u.host for u in w] for w in self.waves],
            "steps": self.steps,
            "left_alone": self.left_alone,
            "uncertified": self.refusals.uncertified,
            "allow_uncertified": self.options.allow_uncertified,
            "start": asdict(self.start) if self.start is not None else None,
            "allow_uncertified_start": self.options.allow_uncertified_start,
            "refused": self.blocking(),
        }


def scheduler_kind(spec: Spec) -> str:
    if spec.slurm is not None:
        return "slurm"
    return "hooks" if spec.upgrade.hooks is not None else "ask"


def node_hosts(spec: Spec) -> dict[str, str]:
    """VM -> host; VMs placed `auto` are placed as provision placed them (same function)."""
    pinned = {v.name: v.host for v in spec.vms if v.host != "auto"}
    if len(pinned) == len(spec.vms):
        return pinned
    try:
        return {p.vm: p.host for p in place(spec)}
    except PlacementError as exc:
        return {**pinned, **{v.name: f"(unplaced: {exc})" for v in spec.vms if v.host == "auto"}}


def units_of(spec: Spec) -> list[Unit]:
    """Hosts in spec order, each with its VMs in spec order (a host with none is a unit too:
    its image may change)."""
    where = node_hosts(spec)
    return [
        Unit(h.name, tuple(v.name for v in spec.vms if where.get(v.name) == h.name))
        for h in spec.hosts
    ]


def node_steps(host_layers: list[Layer], guest_layers: list[Layer], scheduler: str) -> list[str]:
    """One node's chain: the frame around the layers that change its host and its guest."""
    take_out = [ASK, DRAIN] if scheduler == "ask" else [DRAIN, WAIT_DRAINED]
    return [
        *(s.name for s in take_out),
        MEASURE.name,
        SHUTDOWN.name,
        *(s.name for la in host_layers for s in la.steps),
        POWER_ON.name,
        *(s.name for la in guest_layers for s in la.steps),
        VALIDATE.name,
        RESUME.name,
    ]


def build_plan(
    before: Spec,
    after: Spec,
    options: PlanOptions,
    *,
    certified_run: str,
    reference: Reference | None,
    matrix_where: str,
    states: dict[str, NodeState] | None = None,
    run: str = "",
    start: Start | None = None,
) -> UpgradePlan:
    """The roll from `before` (the certified run's spec) to `after`, with every refusal."""
    changes = diff(before, after)
    refusals = refuse.Refusals()
    refusals.errors += refuse.shape_differences(before, after)
    refusals.errors += refuse.layered(before, after, changes)
    refusals.uncertified += refuse.matrix(after, changes, reference, matrix_where)
    refusals.uncertified_start += refusal_of_start(start) if start is not None else []
    kind = scheduler_kind(after)
    units = units_of(after)
    unplaced = [n for n, h in node_hosts(after).items() if h.startswith("(unplaced")]
    refusals.errors += [f"{n}: cannot tell which host runs it; pin vms[].host" for n in unplaced]
    part = after.slurm.partition if after.slurm else "rack"
    partitions: dict[str, tuple[str, ...]] = {v.name: (part,) for v in after.vms}
    if states:
        partitions.update({n: s.partitions for n, s in states.items() if s.partitions})
    sizes: dict[str, int] = {}
    for parts in partitions.values():
        for p in parts:
            sizes[p] = sizes.get(p, 0) + 1
    limits = {p: options.budget.limit(n) for p, n in sizes.items()}
    left_alone: dict[str, str] = {}
    for name, state in (states or {}).items():
        if state.operator_drained(run):
            left_alone[name] = f"drained by someone else: {state.reason or 'no reason given'}"
    host_side = {la.name for la in layers("host")}
    host_changed = {h for c in changes if c.layer in host_side for h in c.hosts}
    moved = {c.layer for c in changes}
    guest_layers = [la for la in layers("guest") if la.name in moved]
    guest_change = bool(guest_layers)
    work = [
        u
        for u in units
        if u.host in host_changed or (guest_change and u.nodes)
        if not any(n in left_alone for n in u.nodes)
    ]
    for u in units:
        if any(n in left_alone for n in u.nodes):
            for n in u.nodes:
                why = f"its host {u.host} carries a node drained by someone else"
                left_alone.setdefault(n, why)
    refusals.errors += unfreeable(work, partitions, limits)
    jobs = {n: s.jobs for n, s in (states or {}).items()}
    ordered = order_units(work, options.order, jobs)
    waves = plan_waves(ordered, partitions, limits) if not refusals.errors else []

    def host_layers(host: str) -> list[Layer]:
        return [la for la in layers("host") if any(la.name == c.layer and host in c.hosts
                                                    for c in changes)]  # fmt: skip

    steps = {
        n: node_steps(host_layers(u.host), guest_layers, kind) for u in ordered for n in u.nodes
    }
    for u in ordered:
        if not u.nodes:
            steps[f"({u.host})"] = [s.name for la in host_layers(u.host) for s in la.steps]
    if uses_vgpu(after):
        note = "host image (vGPU manager) before the guest driver: vGPU VMs need a manager"
        note += " of the same or a newer branch than their driver"
    else:
        note = "host image, then the guest layer, per host (passthrough VMs: either order works;"
        note += " the host is patched with its VMs shut down)"
    if options.order == ["least-busy"]:
        note += "; hosts with the fewest running jobs first" + ("" if states else " (at start)")
    elif options.order:
        note += "; hosts in the order of --order"
    return UpgradePlan(
        rack=after.metadata.name,
        certified_run=certified_run,
        scheduler=kind,
        options=options,
        changes=changes,
        units=ordered,
        partitions=partitions,
        limits=limits,
        waves=waves,
        steps=steps,
        order_note=note,
        refusals=refusals,
        left_alone=left_alone,
        targets=_versions(after),
        befores=_versions(before),
        floors=node_floors(after),
        start=start,
    )


def _versions(spec: Spec) -> dict[str, dict[str, dict[str, str]]]:
    """layer -> where -> versions the spec asks: per host (host side), or "" (guest side)."""
    return {
        la.name: {h.name: la.versions(spec, h.name) for h in spec.hosts}
        if la.side == "host"
        else {"": la.versions(spec, "")}
        for la in layers()
    }
