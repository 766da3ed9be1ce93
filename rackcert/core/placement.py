"""GPU placement: which VM gets which host GPUs, decided from the spec alone.

It lives in the spine because two places need the same answer: the spec rules
(is this layout possible at all?) and the provision planner (what to build).
It is a pure, deterministic function: the same spec always yields the same
placement, so a re-plan never shuffles GPUs between VMs.

Policy, in order of importance:
1. a 2-GPU VM with `nvlink: required` gets a bridged pair or fails;
2. an NVLink pair is never shared by two VMs unless one of them sets
   `allow_split_pair` (the partner of a GPU given alone stays idle);
3. `nvlink: preferred` VMs get a pair when one is free;
4. GPUs on the NUMA node of a NIC first (GPUDirect RDMA wants them close), and a
   VM with a passthrough NIC port before one without, so a vmxnet3 VM never takes
   the GPUs next to the port; `gpu_nic_numa: required` VMs go first of all and get
   GPUs on the node of a free NIC port, or fail (NVIDIA's GPUDirect RDMA guidance:
   GPU and NIC under one PCIe root complex; across the socket link NCCL's defaults
   do not use GPUDirect RDMA, see `gpudirect_warnings`);
5. `host: auto` VMs spread over the hosts with the most free GPUs.
6. on an HGX board a VM takes one free Fabric Manager partition of its size, whole (NVIDIA
   AI Enterprise: a VM's GPUs form one partition; vSphere 8 shows it as a device group):
   the one named by `vms[].device_group`, else the one that breaks up the fewest larger free
   partitions, lowest ID first.

A VM whose template asks for a passthrough NIC gets a NIC function of its own
(the ports of a ConnectX-6 are functions .0, .1 of one device): vSphere powers
on only one VM per passthrough device, so a host cannot give more VMs a
passthrough NIC than it has functions, and a spec that asks for that is
refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rackcert.core.spec import (
    HardwareProfile,
    NicMode,
    NumaPolicy,
    NvlinkPolicy,
    Spec,
    Vm,
    VmTemplate,
)


@dataclass(frozen=True)
class VmPlacement:
    vm: str
    host: str
    gpus: tuple[str, ...]
    numa: int | None
    nic: str | None
    nvlink_pair: bool
    # On an HGX board: the Fabric Manager partition the VM takes whole, and its SXM modules.
    partition: int | None = None
    modules: tuple[int, ...] = ()


@dataclass(frozen=True)
class PlacementProblem:
    vm_index: int
    field: str
    message: str


class PlacementError(ValueError):
    def __init__(self, problem: PlacementProblem):
        super().__init__(problem.message)
        self.problem = problem


@dataclass
class _HostState:
    name: str
    profile: HardwareProfile
    owner: dict[str, str] = field(default_factory=dict)  # gpu pci -> vm name
    reserved: set[str] = field(default_factory=set)  # idle partners of lone GPUs
    nic_owner: dict[str, str] = field(default_factory=dict)  # NIC function -> vm name

    def peer(self, pci: str) -> str | None:
        return next((g.nvlink_peer for g in self.profile.gpus if g.pci == pci), None)

    def numa(self, pci: str) -> int:
        return next(g.numa for g in self.profile.gpus if g.pci == pci)

    def free(self) -> list[str]:
        return [g.pci for g in self.profile.gpus if g.pci not in self.owner]

    def free_count(self) -> int:
        return len(self.free())

    def nic_numas(self) -> set[int]:
        return {n.numa for n in self.profile.nics}

    def nic_for(self, numa: int | None) -> str | None:
        nics = sorted(self.profile.nics, key=lambda n: (n.numa != numa, n.pci))
        return nics[0].pci if nics else None

    def nic_functions(self, numa: int | None) -> list[str]:
        """Every passthrough NIC function of the host, nearest NUMA node first."""
        nics = sorted(self.profile.nics, key=lambda n: (n.numa != numa, n.pci))
        return [nic_function(n.pci, port) for n in nics for port in range(n.ports)]

    def free_nic_function(self, numa: int | None) -> str | None:
        return next((f for f in self.nic_functions(numa) if f not in self.nic_owner), None)


def nic_function(nic_pci: str, port: int) -> str:
    """PCI address of a NIC port: the ports are functions of one device (4b:00.0, 4b:00.1)."""
    return nic_pci[:-1] + str(port)


def _rank(state: _HostState, pcis: list[str]) -> list[str]:
    near = state.nic_numas()
    return sorted(pcis, key=lambda p: (state.numa(p) not in near, state.numa(p), p))


def _free_pairs(state: _HostState) -> list[tuple[str, str]]:
    free = set(state.free()) - state.reserved
    pairs = []
    for pci in _rank(state, sorted(free)):
        peer = state.peer(pci)
        if peer and peer in free and (peer, pci) not in pairs:
            pairs.append((pci, peer))
    return pairs


def _singles(state: _HostState, allow_split: bool) -> list[str]:
    """Free GPUs a lone VM may take, best first: unpaired, then from whole pairs."""
    free = [p for p in state.free() if allow_split or p not in state.reserved]
    unpaired = [p for p in free if state.peer(p) is None]
    whole = [p for p in free if state.peer(p) and state.peer(p) in free]
    broken = [p for p in free if p not in unpaired and p not in whole]
    if not allow_split:
        broken = []
    return _rank(state, unpaired) + _rank(state, whole) + _rank(state, broken)


def _choose(state: _HostState, vm: Vm, count: int, nvlink: NvlinkPolicy) -> list[str] | str:
    """GPUs for one VM on one host, or a reason why not."""
    if count == 0:
        return []
    pairs = _free_pairs(state)
    if count == 2 and nvlink is not NvlinkPolicy.none and pairs:
        return list(pairs[0])
    if count == 2 and nvlink is NvlinkPolicy.required:
        return f"no free NVLink-bridged GPU pair on host {state.name!r}"
    chosen: list[str] = []
    for a, b in pairs:
        if len(chosen) + 2 <= count:
            chosen += [a, b]
    for pci in _singles(state, vm.allow_split_pair):
        if len(chosen) == count:
            break
        if pci not in chosen:
            chosen.append(pci)
    if len(chosen) < count:
        have = state.free_count()
        return (
            f"host {state.name!r} has {have} free GPU(s) for {count} asked"
            if have < count
            else f"host {state.name!r} cannot give {count} GPU(s) without splitting an NVLink"
            " pair (set allow_split_pair: true to allow it)"
        )
    return chosen


def _choose_near(state: _HostState, vm: Vm, count: int, nvlink: NvlinkPolicy) -> list[str] | str:
    """GPUs only from the NUMA nodes of the host's free NIC functions (gpu_nic_numa: required)."""
    nodes = {
        n.numa
        for n in state.profile.nics
        if any(nic_function(n.pci, p) not in state.nic_owner for p in range(n.ports))
    }
    far = [g.pci for g in state.profile.gpus if g.numa not in nodes and g.pci not in state.owner]
    for pci in far:  # out of reach for this choice only
        state.owner[pci] = ""
    try:
        picked = _choose(state, vm, count, nvlink)
    finally:
        for pci in far:
            del state.owner[pci]
    if isinstance(picked, str):
        where = ", ".join(str(n) for n in sorted(nodes)) or "none"
        return (
            f"{picked} on the NUMA node(s) of a free passthrough NIC port ({where}):"
            " gpu_nic_numa: required keeps GPUDirect RDMA on one node"
        )
    return picked


def _partition_free(state: _HostState, modules: list[int]) -> bool:
    gpus = [state.profile.module_gpu(m) for m in modules]
    return all(g is not None and g.pci not in state.owner for g in gpus)


def _choose_partition(state: _HostState, vm: Vm, count: int) -> tuple[list[str], int] | str:
    """A free partition of `count` GPUs on the host's board: its GPUs (module order) and ID."""
    board = state.profile.board
    assert board is not None
    if vm.device_group is not None:
        wanted = [p for p in board.partitions if p.name == vm.device_group]
    else:
        wanted = [p for p in board.partitions if len(p.modules) == count]
    free = [p for p in wanted if _partition_free(state, p.modules)]
    if not free:
        what = vm.device_group or f"partition of {count} GPU(s)"
        return f"no free {what} on host {state.name!r} (board {board.name})"
    bigger = [p for p in board.partitions if len(p.modules) > count]

    def broken(part_modules: list[int]) -> int:
        return sum(
            1
            for b in bigger
            if _partition_free(state, b.modules) and set(b.modules) & set(part_modules)
        )

    best = min(free, key=lambda p: (broken(p.modules), p.id))
    pcis = [g.pci for m in sorted(best.modules) if (g := state.profile.module_gpu(m))]
    return pcis, best.id


def _partition_of(state: _HostState, gpus: list[str]) -> int | None:
    board = state.profile.board
    if board is None:
        return None
    modules = sorted(g.module_id or 0 for g in state.profile.gpus if g.pci in gpus)
    return next((p.id for p in board.partitions if sorted(p.modules) == modules), None)


def _commit(state: _HostState, vm: Vm, gpus: list[str]) -> None:
    for pci in gpus:
        state.owner[pci] = vm.name
    for pci in gpus:
        peer = state.peer(pci)
        if peer and peer not in gpus and peer not in state.owner:
            state.reserved.add(peer)


def place(spec: Spec) -> list[VmPlacement]:
    """Place every VM of the spec; raise PlacementError naming the first VM that cannot be."""
    known = {p.name: p for p in spec.hardware_profiles}
    states = {h.name: _HostState(h.name, known[h.profile]) for h in spec.hosts}
    templates = {t.name: t for t in spec.vm_templates}
    order = [i for i, v in enumerate(spec.vms) if v.gpus] + [
        i for i, v in enumerate(spec.vms) if not v.gpus and v.host != "auto"
    ]
    order += [i for i, v in enumerate(spec.vms) if not v.gpus and v.host == "auto"]
    # Stable: explicit GPUs, then pinned, then auto VMs (as before); within each group
    # gpu_nic_numa: required VMs first, then those with a passthrough NIC port.
    group = {index: n for n, index in enumerate(order)}
    order.sort(
        key=lambda i: (_group(spec.vms[i]), _nic_rank(templates[spec.vms[i].template]), group[i])
    )
    result: dict[int, VmPlacement] = {}
    for index in order:
        vm = spec.vms[index]
        tmpl = templates[vm.template]
        if vm.host == "auto":
            candidates = sorted(states.values(), key=lambda s: (-s.free_count(), s.name))
        else:
            candidates = [states[vm.host]]
        reason = ""
        for state in candidates:
            picked = _explicit(state, vm, index) if vm.gpus else None
            if picked is None and state.profile.board is not None and tmpl.gpus:
                chosen = _choose_partition(state, vm, tmpl.gpus)
                picked = chosen if isinstance(chosen, str) else chosen[0]
            elif picked is None and _near_required(tmpl) and state.profile.nics:
                picked = _choose_near(state, vm, tmpl.gpus, tmpl.nvlink)
            elif picked is None:
                picked = _choose(state, vm, tmpl.gpus, tmpl.nvlink)
            if isinstance(picked, str):
                reason = reason or picked
                continue
            numa = state.numa(picked[0]) if picked else None
            if state.profile.board and len({state.numa(g) for g in picked}) > 1:
                numa = None  # a partition across both sockets: no one node to pin the VM to
            nic = state.nic_for(numa)
            if tmpl.nic is NicMode.passthrough and state.profile.nics:
                nic = state.free_nic_function(numa)
                if nic is None:
                    reason = reason or _no_nic_function(state)
                    continue
                state.nic_owner[nic] = vm.name
            _commit(state, vm, picked)
            paired = len(picked) == 2 and state.peer(picked[0]) == picked[1]
            partition = _partition_of(state, picked) if picked else None
            modules = tuple(
                sorted(g.module_id for g in state.profile.gpus if g.pci in picked and g.module_id)
            )
            result[index] = VmPlacement(
                vm.name, state.name, tuple(picked), numa, nic, paired, partition, modules
            )
            break
        else:
            where = "any host" if vm.host == "auto" else f"host {vm.host!r}"
            raise PlacementError(
                PlacementProblem(
                    index, "template", f"cannot place VM {vm.name!r} on {where}: {reason}"
                )
            )
    return [result[i] for i in range(len(spec.vms))]


def _group(vm: Vm) -> int:
    return 0 if vm.gpus else (1 if vm.host != "auto" else 2)


def _near_required(tmpl: VmTemplate) -> bool:
    return (
        tmpl.gpu_nic_numa is NumaPolicy.required
        and tmpl.nic is NicMode.passthrough
        and tmpl.gpus > 0
    )


def _nic_rank(tmpl: VmTemplate) -> int:
    if _near_required(tmpl):
        return 0
    return 1 if tmpl.nic is NicMode.passthrough and tmpl.gpus else 2


def gpudirect_warnings(spec: Spec, placements: list[VmPlacement]) -> list[str]:
    """One line per VM whose GPUs and passthrough NIC port sit on different NUMA nodes.

    Such a VM gets pciPassthru.allowP2P (GPU and NIC talk peer to peer), but GPUDirect
    RDMA then crosses the socket link (UPI), which NVIDIA's guidance advises against and
    NCCL's defaults do not use (NCCL_NET_GDR_LEVEL stops at PHB): the traffic goes through
    host memory instead. `gpu_nic_numa: required` turns this into a refusal.
    """
    out = []
    templates = {t.name: t for t in spec.vm_templates}
    for p in placements:
        vm = next(v for v in spec.vms if v.name == p.vm)
        tmpl = templates[vm.template]
        if tmpl.nic is not NicMode.passthrough or not p.gpus or p.nic is None:
            continue
        profile = spec.host_profile(p.host)
        gpu_nodes = sorted({g.numa for g in profile.gpus if g.pci in p.gpus})
        nic_node = next((n.numa for n in profile.nics if n.pci[:-1] == p.nic[:-1]), None)
        if nic_node is None or gpu_nodes == [nic_node]:
            continue
        nodes = ", ".join(str(n) for n in gpu_nodes)
        out.append(
            f"VM {p.vm}: GPU(s) {', '.join(p.gpus)} on NUMA node {nodes}, NIC port {p.nic}"
            f" on node {nic_node}: GPUDirect RDMA (pciPassthru.allowP2P) crosses the socket"
            " link, which NCCL's defaults do not use (traffic goes through host memory);"
            " put GPU and NIC on one node, or set gpu_nic_numa: required to refuse this"
        )
    return out


def _no_nic_function(state: _HostState) -> str:
    functions = state.nic_functions(None)
    owners = ", ".join(sorted(set(state.nic_owner.values())))
    return (
        f"host {state.name!r} has {len(functions)} passthrough NIC function(s)"
        f" ({', '.join(functions)}), all given to VM(s) {owners}; one function belongs to"
        " one VM: use nic: vmxnet3 (or sriov) for this VM's template, or another host"
    )


def _explicit(state: _HostState, vm: Vm, index: int) -> list[str]:
    """Validate a VM's explicit GPU list against the host; raise on conflicts."""
    gpus = list(vm.gpus or [])
    have = {g.pci for g in state.profile.gpus}
    for j, pci in enumerate(gpus):
        if pci not in have:
            raise PlacementError(
                PlacementProblem(index, f"gpus[{j}]", f"host {state.name!r} has no GPU {pci}")
            )
        if pci in state.owner:
            raise PlacementError(
                PlacementProblem(
                    index, f"gpus[{j}]", f"GPU {pci} is already given to VM {state.owner[pci]!r}"
                )
            )
        partner = state.peer(pci)
        partner_owner = state.owner.get(partner or "")
        if partner_owner and partner not in gpus and not vm.allow_split_pair:
            raise PlacementError(
                PlacementProblem(
                    index,
                    f"gpus[{j}]",
                    f"GPU {pci} and its NVLink peer {partner} would go to different VMs"
                    f" ({vm.name!r}, {partner_owner!r}); set allow_split_pair: true to allow it",
                )
            )
    return gpus
