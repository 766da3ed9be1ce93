"""How much of the rack provision changes at once: host waves and VM tasks in flight.

Why: a GPU server's reboot takes minutes and a full clone takes minutes, so a rack done one
host and one VM at a time spends hours of its bring-up window waiting. vSphere Lifecycle
Manager remediates hosts in parallel, up to a number of hosts in maintenance mode the user
sets; Terraform applies with `-parallelism=10`. provision does the same:

- hosts without powered-on workload VMs (a new rack) are prepared all at once: nothing
  runs on them, so nothing is lost while they reboot;
- hosts that carry running VMs (`--power-cycle`) go in waves of `max_hosts_in_maintenance`,
  by default what the cluster can lose: the failover level of its HA admission control
  where that is enabled, else one host at a time (vLCM's default, sequential remediation);
- VM work (clones, reconfigurations, power-ons) has `parallelism` vCenter tasks in flight,
  10 by default; vCenter queues beyond its own per-host and per-datastore limits anyway.

A free task slot goes to a VM's later step before a new clone (`Slots`, `RANK`): with FIFO
slots every clone of the rack went first and the VMs that were cloned waited behind them
for their customize and power-on, so none finished until all were cloned. Maintenance mode
takes no slot: it is a host's window, not VM work, and vCenter does not count it among the
provisioning operations it limits (limits.go in the twin cites the rule).

`host_waves` is pure (the plan shows the waves); `cluster_tolerance` reads the cluster's HA
configuration in one property read.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_PARALLELISM = 10  # Terraform's -parallelism default


@dataclass(frozen=True)
class Pace:
    """How much runs at once (see the module docstring); `poll_s` paces the VM boot waits."""

    parallelism: int = DEFAULT_PARALLELISM
    max_hosts_in_maintenance: int | None = None  # None: what the cluster can lose
    poll_s: float = 1.0

    @property
    def sequential(self) -> bool:
        """parallelism 1 is the order provision had before lanes: one host, then the next,
        one vCenter task at a time."""
        return self.parallelism <= 1


# Who gets a free slot first (lower first): what finishes a VM before what starts one.
RANK = {
    "vm.power_on": 0,
    "power": 0,  # powering VMs off to change them, or on again afterwards
    "vm.customize": 1,
    "vm.reconfigure": 1,
    "vm.clone": 2,
    "vm.create": 2,
}


class Slots:
    """`size` vCenter tasks in flight, a free slot going to the lowest rank waiting (then
    the longest waiting): `with slots.take(RANK[kind]):`.

        >>> slots = Slots(1)
        >>> with slots.take(RANK["vm.clone"]):
        ...     pass
    """

    def __init__(self, size: int) -> None:
        self.free = max(1, size)
        self.cond = threading.Condition()
        self.waiting: list[tuple[int, int]] = []  # a heap of (rank, ticket)
        self.tickets = itertools.count()

    @contextlib.contextmanager
    def take(self, rank: int) -> Iterator[None]:
        with self.cond:
            mine = (rank, next(self.tickets))
            heapq.heappush(self.waiting, mine)
            while self.free == 0 or self.waiting[0] != mine:
                self.cond.wait()
            heapq.heappop(self.waiting)
            self.free -= 1
            self.cond.notify_all()  # the next in line may take another free slot
        try:
            yield
        finally:
            with self.cond:
                self.free += 1
                self.cond.notify_all()


def host_waves(hosts: Sequence[tuple[str, bool]], max_in_maintenance: int) -> list[list[str]]:
    """Waves of host names: [(name, carries_running_vms)] in plan order -> waves.

    The hosts without running VMs form the first wave, all of them; the others follow in
    waves of at most `max_in_maintenance` (at least 1).

        >>> host_waves([("a", False), ("b", True), ("c", True), ("d", False)], 1)
        [['a', 'd'], ['b'], ['c']]
    """
    size = max(1, max_in_maintenance)
    idle = [name for name, busy in hosts if not busy]
    busy = [name for name, busy in hosts if busy]
    waves = [idle] if idle else []
    waves += [busy[i : i + size] for i in range(0, len(busy), size)]
    return waves


def tolerance_of(das_config: Any) -> int:
    """Hosts the cluster can lose, from ClusterDasConfigInfo: HA admission control's
    failover level where HA and admission control are on, else 1 (one host at a time)."""
    if das_config is None or not das_config.enabled or not das_config.admissionControlEnabled:
        return 1
    policy = das_config.admissionControlPolicy
    level = getattr(policy, "failoverLevel", None)  # host failures / slot policy (and 7.0's %)
    if level:
        return max(1, int(level))
    hosts = getattr(policy, "failoverHosts", None)  # dedicated failover hosts policy
    if hosts:
        return max(1, len(hosts))
    return max(1, int(das_config.failoverLevel or 1))


def cluster_tolerance(si: Any, host_moid: str) -> int:
    """What the cluster of this host can lose (tolerance_of its HA configuration)."""
    from pyVmomi import vim

    host = vim.HostSystem(host_moid, stub=si._stub)
    cluster = host.parent
    if not isinstance(cluster, vim.ClusterComputeResource):
        return 1
    config: Any = cluster.configurationEx  # ClusterConfigInfoEx on a cluster
    return tolerance_of(config.dasConfig)
