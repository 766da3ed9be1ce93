"""What the roll asks of the world, as typing.Protocol ports, and the values they return.

Why ports: the roll's logic (order, budget, states, record) is tested as pure units
against in-memory ports, and the flows floor wires the real ones (Slurm, pyVmomi, the
host-image client, the Ansible roles, validate) without this package importing a stage.

A scheduler node's state is Slurm's: a base state (IDLE, MIXED, ALLOCATED, DOWN, ...)
plus flags; DRAIN on a node that still runs jobs is DRAINING (sinfo `drng`), on one
with none DRAINED (sinfo `drain`) (Slurm's sinfo(1), NODE STATE CODES).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from rackcert.core.errors import RackcertError

REASON_PREFIX = "rackcert upgrade"


def drain_reason(run: str, finding: str = "") -> str:
    """`rackcert upgrade <run>`, and `: <finding>` when the node failed (one line)."""
    base = f"{REASON_PREFIX} {run}"
    text = " ".join(finding.split())
    return f"{base}: {text}"[:200] if text else base


@dataclass(frozen=True)
class NodeState:
    """One node as the scheduler has it.

    `base` is Slurm's base state in upper case (IDLE, MIXED, ALLOCATED, COMPLETING, DOWN,
    UNKNOWN); `drain` the DRAIN flag; `jobs` the jobs running on it; `reason` who drained
    it and why (empty when nobody did).
    """

    name: str
    base: str = "IDLE"
    drain: bool = False
    jobs: int = 0
    reason: str = ""
    partitions: tuple[str, ...] = ()

    @property
    def draining(self) -> bool:
        return self.drain and (self.jobs > 0 or self.base in ("MIXED", "ALLOCATED", "COMPLETING"))

    @property
    def drained(self) -> bool:
        return self.drain and not self.draining

    @property
    def down(self) -> bool:
        return self.base in ("DOWN", "UNKNOWN", "FAIL", "FUTURE")

    @property
    def in_service(self) -> bool:
        """Slurm may start a job on it: not drained, not down."""
        return not self.drain and not self.down

    def drained_by(self, run: str) -> bool:
        return self.drain and (
            self.reason == drain_reason(run) or self.reason.startswith(drain_reason(run) + ":")
        )

    def operator_drained(self, run: str) -> bool:
        """Drained, and not by this roll: someone else's (an operator, a health check)."""
        return self.drain and not self.drained_by(run)


class Scheduler(Protocol):
    """Slurm (scontrol, sinfo, squeue), a site's hook commands, or a person asked."""

    kind: str  # "slurm", "hooks" or "ask"

    def nodes(self, names: list[str]) -> dict[str, NodeState]:
        """The named nodes' states, read at once (a missing node is DOWN with a reason)."""
        ...

    def drain(self, node: str, reason: str) -> None: ...

    def resume(self, node: str) -> None: ...

    def set_reason(self, node: str, reason: str) -> None:
        """Keep the node drained, with a new reason (the finding that failed it)."""
        ...


class Hypervisor(Protocol):
    """vCenter for one rack: VMs' power and the hosts' maintenance windows and reboots."""

    def power_state(self, vm: str) -> str:
        """poweredOn, poweredOff or suspended."""
        ...

    def shutdown_guest(self, vm: str) -> None:
        """Ask VMware Tools to shut the guest down (returns before the guest is off)."""
        ...

    def power_off(self, vm: str) -> None: ...

    def power_on(self, vm: str) -> str | None:
        """Power the VM on and wait until its guest answers; a line for the record, if any
        (rackcert.rollout.HostKeyGate: the enrolled host key it answered with)."""
        ...

    def enter_maintenance(self, host: str, run: str) -> None:
        """Maintenance mode with rackcert's mark (provision/maintenance_mark.py)."""
        ...

    def exit_maintenance(self, host: str) -> None:
        """Leave maintenance mode and clear rackcert's mark."""
        ...

    def marked_hosts(self) -> list[str]:
        """Hosts carrying rackcert's maintenance mark (an interrupted run's windows)."""
        ...

    def boot_time(self, host: str) -> str:
        """runtime.bootTime, ISO 8601 UTC."""
        ...

    def reboot(self, host: str) -> None:
        """Ask the host to reboot (returns once accepted; bootTime tells when it did)."""
        ...


class HostImage(Protocol):
    """The host image as vSphere manages it (vLCM desired state, or esxcli software)."""

    def current(self, host: str) -> dict[str, str]:
        """What the host runs: `esxi` (base image version) and component -> version."""
        ...

    def apply(self, host: str, versions: dict[str, str]) -> None:
        """Remediate the host (in maintenance mode) to these versions; the reboot is the
        roll's own step."""
        ...


class Guest(Protocol):
    """The guest software, through the Ansible roles limited to one node."""

    def apply(self, node: str, versions: dict[str, str]) -> None:
        """Install these versions (component -> version), rebooting the VM where needed."""
        ...


@dataclass
class Certificate:
    """What a node's validate and per-node localisation showed.

    versions: component -> version observed (nvidia_driver, cuda, ofed, ...);
    checks: check id -> pass/fail/error/skip (rackcert.core.results.Status); figures: name -> value;
    floors: name -> the rule's minimum (absolute threshold) for that figure; reference:
    name -> the same figure read on the controller at the same moment, present only where
    the node's CPUs were the controller's machine's (one boot_id: the lab), so that the
    judge compares the node's share of that machine (validation.bench.localisation.reference).
    """

    versions: dict[str, str] = field(default_factory=dict)
    checks: dict[str, str] = field(default_factory=dict)
    figures: dict[str, float] = field(default_factory=dict)
    floors: dict[str, float] = field(default_factory=dict)
    reference: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "versions": dict(self.versions),
            "checks": dict(self.checks),
            "figures": dict(self.figures),
            "floors": dict(self.floors),
            "reference": dict(self.reference),
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Certificate:
        return cls(
            versions=dict(raw.get("versions", {})),
            checks=dict(raw.get("checks", {})),
            figures={k: float(v) for k, v in raw.get("figures", {}).items()},
            floors={k: float(v) for k, v in raw.get("floors", {}).items()},
            reference={k: float(v) for k, v in raw.get("reference", {}).items()},
        )


class Certifier(Protocol):
    """The node's own validate and localisation's per-node stage."""

    def baseline(self, nodes: list[str]) -> dict[str, Certificate]:
        """Each node as the start run recorded it: its figures give the rack's median where
        that run localised (a node's own before is measured with `certify`)."""
        ...

    def certify(self, node: str, versions: dict[str, str]) -> Certificate:
        """Validate the node and run the per-node stage on it, against the spec of these guest
        versions: the certified one for its before and on a rollback, the new one after."""
        ...


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class RealClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class PortError(RackcertError):
    """A port could not do what was asked; the message is one line naming what failed."""
