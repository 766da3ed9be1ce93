"""What an upgrade layer is, written once: the declaration every reader of the roll takes.

Why in the spine: the roll (rackcert.upgrade) runs the layers, but the record's states
(rackcert.core.stage_records), the metrics' state families (rackcert.metrics.upgrade) and the
report (rackcert.report.rolling) read them too, and the stages never import each other. A
layer declares its spec fields, the port it needs, its side of a host's chain, its steps
(name, action, how each proves itself done), its refusals and, on the guest side, the
Ansible tags of the components it moves. Registering one (`register`) is all the roll,
record, metrics, report and `--plan` need to know of it.

A host's chain is the frame's take-out steps (drain, wait drained, shutdown guest), the
host-side layers that change the host, power on, the guest-side layers that change, then
the frame's put-back steps (validate, resume).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from rackcert.core.spec import Spec

Side = Literal["host", "guest"]


class StepContext(Protocol):
    """What a step's action is given (the roll's machine builds it per host or node)."""

    @property
    def where(self) -> str:
        """The host (host side) or the node (guest side)."""
        ...

    @property
    def target(self) -> dict[str, str]:
        """The versions this chain moves to (the certified ones on a rollback)."""
        ...

    @property
    def run(self) -> str:
        """The roll's run name (rackcert's maintenance mark, drain reasons)."""
        ...

    @property
    def port(self) -> Any:
        """The layer's own port (Layer.port)."""
        ...

    @property
    def hypervisor(self) -> Any:
        """vCenter (the machine's port): maintenance windows, reboots."""
        ...

    def apply(self) -> str:
        """Read the port's current() versions; apply the target unless already there."""
        ...

    def reboot(self) -> str:
        """Reboot the host; a later bootTime proves it."""
        ...

    def remember_boot_time(self, until: str) -> None:
        """Record the host's bootTime before anything may reboot it, unless this chain's
        step `until` (the one that installs what the reboot runs) already ended."""
        ...


Action = Callable[[StepContext], object]


@dataclass(frozen=True)
class Step:
    """One recorded step: `name` in upgrade.json and the plan; `action` does it and returns
    a detail line (or nothing); `proof` says how it proves itself done (the plan prints it);
    `state` (host side): the host's state while it runs, "" to leave it as it was."""

    name: str
    proof: str
    action: Action | None = None
    state: str = ""


@dataclass(frozen=True)
class Change:
    """One component that moves: on these hosts (host side) or every node (guest side)."""

    layer: str
    component: str
    before: str | None
    after: str | None
    hosts: tuple[str, ...] = ()

    def line(self) -> str:
        where = f" on {', '.join(self.hosts)}" if self.hosts else ""
        return f"{self.layer}: {self.component} {self.before or '-'} -> {self.after or '-'}{where}"


Refusal = Callable[[Spec, Spec, list[Change]], list[str]]


@dataclass(frozen=True)
class Layer:
    """One upgrade layer.

    name: the record's `changes[].layer`; fields: the spec fields it reads (docs, the plan);
    versions(spec, where): component -> version the spec asks of a host (host side) or of
    every node (guest side, where = ""); components: the guest side's component order;
    port: the Ports entry it needs, and `no_port` the refusal when none is wired;
    side: where it sits in a host's chain; node_state: the nodes' state while it runs;
    steps: in order; done_state: the host's state after them; window_states / window /
    close: the host states in which a failure must close what the layer opened (its word,
    and how); prepare: run once before the steps; read_back: the host's image_before and
    image_after hold this layer's versions, and the node's certification checks them;
    refusals: what it will not do; matrix_names: the certified matrix's name of a
    component where it differs; tags: component -> the Ansible tags (site.yml's roles)
    that move it (guest side); adapter: "module:function" that builds the port from the
    roll's wiring (rackcert.rollout.Wiring: the new and certified specs, the run), called
    by the flows floor, which alone may join a stage to provision or configure."""

    name: str
    side: Side
    port: str
    fields: tuple[str, ...]
    versions: Callable[[Spec, str], dict[str, str]]
    steps: tuple[Step, ...]
    node_state: str
    components: tuple[str, ...] = ()
    no_port: str = ""
    done_state: str = ""
    window_states: tuple[str, ...] = ()
    window: str = ""
    close: Action | None = None
    prepare: Action | None = None
    read_back: bool = False
    refusals: tuple[Refusal, ...] = ()
    matrix_names: dict[str, str] = field(default_factory=dict)
    tags: dict[str, tuple[str, ...]] = field(default_factory=dict)
    adapter: str = ""

    def missing_port(self) -> str:
        return self.no_port or (
            f"the {self.name} layer changes, but no {self.port} port is wired;"
            " roll the other layers alone, or wire its adapter"
        )


# -- the frame: the steps every host's chain takes whatever changes --------------------------
ASK = Step("ask", "the operator answers that the node runs no job (no scheduler known)")
DRAIN = Step("drain", "the scheduler shows the node drained with this roll's reason")
WAIT_DRAINED = Step("wait drained", "the scheduler shows DRAINED: no job runs on the node")
MEASURE = Step(
    "measure before",
    "validate and localisation's per-node stage ran on the node, drained and idle, its host"
    " still up (the before it is judged against)",
)
SHUTDOWN = Step("shutdown guest", "vCenter shows the VM poweredOff (Tools, else PowerOff)")
POWER_ON = Step("power on", "the guest answers again")
VALIDATE = Step(
    "validate",
    "validate and localisation's per-node stage observe the new versions and nothing worse",
)
RESUME = Step("resume", "the scheduler shows the node back in service")

# The nodes' states around the layers', and where the roll leaves them.
NODE_TAKE_OUT = ("pending", "draining", "drained", "down")
NODE_POWERED_ON = "powered_on"
NODE_VALIDATING = "validating"
NODE_ENDS = ("resumed", "failed", "skipped", "left_alone", "rolled_back")
HOST_ENDS = ("unchanged", "done", "failed")

_REGISTRY: dict[str, Layer] = {}


def register(layer: Layer) -> Layer:
    """Add a layer after those registered (a package outside rackcert.upgrade may)."""
    if layer.name in _REGISTRY:
        raise ValueError(f"upgrade layer {layer.name!r} is registered already")
    taken = {s.name for other in _REGISTRY.values() for s in other.steps} | {s.name for s in FRAME}
    clash = [s.name for s in layer.steps if s.name in taken]
    if clash:
        raise ValueError(f"upgrade layer {layer.name!r}: step {clash[0]!r} is another's")
    _REGISTRY[layer.name] = layer
    return layer


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


@contextmanager
def registered(layer: Layer) -> Iterator[Layer]:
    """The layer registered for the block's length (tests)."""
    register(layer)
    try:
        yield layer
    finally:
        unregister(layer.name)


def layers(side: Side | None = None) -> tuple[Layer, ...]:
    """The registered layers in order (host image and guest first), of one side or all."""
    return tuple(la for la in _REGISTRY.values() if side is None or la.side == side)


def layer(name: str) -> Layer:
    return _REGISTRY[name]


FRAME = (ASK, DRAIN, WAIT_DRAINED, MEASURE, SHUTDOWN, POWER_ON, VALIDATE, RESUME)


def layer_names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def node_states() -> tuple[str, ...]:
    """Every state a node of a roll can be in, in the chain's order."""
    return (
        *NODE_TAKE_OUT,
        *(la.node_state for la in layers("host")),
        NODE_POWERED_ON,
        *(la.node_state for la in layers("guest")),
        NODE_VALIDATING,
        *NODE_ENDS,
    )


def host_states() -> tuple[str, ...]:
    """Every state a host of a roll can be in, in the chain's order."""
    out = ["pending"]
    for la in layers("host"):
        out += [s.state for s in la.steps if s.state]
        out += [la.done_state] if la.done_state else []
    return (*dict.fromkeys([*out, *HOST_ENDS]),)


def window_states() -> tuple[str, ...]:
    """Host states in which a layer holds a window open (a failure must close it)."""
    return tuple(s for la in layers("host") for s in la.window_states)


def out_of_service_states() -> tuple[str, ...]:
    """Node states in which the roll holds the node out of service."""
    chain = node_states()
    return (*chain[chain.index("draining") : chain.index(NODE_VALIDATING) + 1], "failed")


def step_proofs() -> dict[str, str]:
    """Every step's name -> how it proves itself done (frame and layers)."""
    return {s.name: s.proof for s in (*FRAME, *(s for la in layers() for s in la.steps))}


def guest_tags(changes: list[Change]) -> tuple[str, ...] | None:
    """The Ansible tags of the guest-side components these changes move, in declaration
    order, each once (empty: no change configure's roles make; None: a component no role
    is declared for moves, so every role runs, as site.yml whole)."""
    out: dict[str, None] = {}
    for change in changes:
        decl = _REGISTRY.get(change.layer)
        if decl is None or decl.side != "guest" or not decl.tags:
            continue  # not a layer configure's roles move
        tags = decl.tags.get(change.component)
        if not tags:
            return None
        out.update(dict.fromkeys(tags))
    return tuple(out)


def diff(before: Spec, after: Spec) -> list[Change]:
    """Every component that differs, layer by layer in registry order: a host-side layer's
    per component with the hosts it moves on (in host order), a guest side's per component."""
    out: list[Change] = []
    names = [h.name for h in after.hosts if h.name in {b.name for b in before.hosts}]
    for decl in layers():
        if decl.side == "guest":
            old, new = decl.versions(before, ""), decl.versions(after, "")
            order = decl.components or (*new, *(k for k in old if k not in new))
            out += [
                Change(decl.name, c, old.get(c), new.get(c))
                for c in order
                if old.get(c) != new.get(c)
            ]
            continue
        per_component: dict[tuple[str, str | None, str | None], list[str]] = {}
        for host in names:
            old, new = decl.versions(before, host), decl.versions(after, host)
            for comp in [*new, *(k for k in old if k not in new)]:
                if old.get(comp) != new.get(comp):
                    key = (comp, old.get(comp), new.get(comp))
                    per_component.setdefault(key, []).append(host)
        out += [Change(decl.name, c, o, n, tuple(h)) for (c, o, n), h in per_component.items()]
    return out
