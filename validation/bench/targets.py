"""The bench's nodes: which VMs a run measures, how to reach them, which interpreter runs there.

Why apart: the orchestration, the units (storage, rdma) and localisation all need the same
answer to "which nodes, over which SSH target".
"""

from __future__ import annotations

from pathlib import Path

from rackcert.core.errors import InputError
from rackcert.core.known_hosts import peer_lines
from rackcert.core.spec import Spec, Vm
from rackcert.core.ssh_target import SshTarget
from validation.bench.options import BenchOptions
from validation.bench.transport import Node


def select_vms(spec: Spec, names: list[str] | None) -> list[Vm]:
    """The bench nodes: the named VMs, or the first VM's template's VMs, one per ESXi host.

    Multi-node scaling means across hosts (the seed's Scenario 2: one 1-GPU VM on each of
    four hosts); two VMs sharing a host would share its PCIe and NIC. Hosts come from
    rackcert.core.placement, the same answer the provision planner uses.
    """
    if not spec.vms:
        raise InputError("the spec has no vms: nothing to bench across nodes (try --local)")
    if names:
        known = {v.name: v for v in spec.vms}
        missing = [n for n in names if n not in known]
        if missing:
            raise InputError(f"--vms {missing[0]}: no such VM in the spec")
        return [known[n] for n in names]
    from rackcert.core.placement import place

    host_of = {p.vm: p.host for p in place(spec)}
    first = spec.vms[0].template
    chosen: list[Vm] = []
    seen: set[str] = set()
    for vm in spec.vms:
        if vm.template == first and host_of[vm.name] not in seen:
            seen.add(host_of[vm.name])
            chosen.append(vm)
    return chosen


def nodes_of(spec: Spec, vms: tuple[Vm, ...], opts: BenchOptions) -> list[Node]:
    ssh = spec.guest.ssh
    pins = str(opts.known_hosts) if opts.known_hosts else None
    return [
        Node(
            v.name,
            SshTarget(
                host=v.address,
                port=v.ssh_port,
                user=ssh.user,
                identity_file=ssh.key_file,
                known_hosts=pins,
                connect_timeout=15,
            ),
        )
        for v in vms
    ]


def host_keys(opts: BenchOptions, nodes: list[Node]) -> list[str] | None:
    """The nodes' enrolled keys from the controller's known_hosts, for the launchers' hops
    from the first node (None without a file: the nodes' own known_hosts, strictly)."""
    if not opts.known_hosts or not Path(opts.known_hosts).is_file():
        return None
    return peer_lines(Path(opts.known_hosts), [(n.name, n.address, n.port) for n in nodes])


def remote_python(spec: Spec, opts: BenchOptions) -> str:
    """The nodes' interpreter: --remote-python, else the DL environment configure built."""
    return opts.remote_python or f"{spec.guest.dl_venv.rstrip('/')}/bin/python"


def engine_gpus(spec: Spec, vms: tuple[Vm, ...]) -> bool:
    return bool(vms) and (spec.template(vms[0].template).gpus or 0) > 0
