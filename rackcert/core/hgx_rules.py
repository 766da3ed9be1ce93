"""Spec rules for HGX boards and vendor device groups: what NVIDIA and vSphere 8 refuse.

Each rule yields (location, message) pairs; `rackcert.core.spec_rules` turns them into
file:line errors. The decision itself (passthrough, vGPU or device group, by GPU kind
and vSphere release) is `rackcert.core.gpu_attach.decide`; these rules only say where in
the spec a refused combination sits and what to change.

Sources: NVIDIA AI Enterprise on NVSwitch systems (vGPU only under vSphere; vGPUs that
talk peer to peer in one VM; a VM's GPUs are one Fabric Manager partition), NVIDIA's
Fabric Manager User Guide (the partitions), the vSphere 8.0.0.1 API (device groups).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from rackcert.core.gpu_attach import DEVICE_GROUP_API, NVAIE_NVSWITCH, GpuKind, decide, host_line
from rackcert.core.spec import Board, Host, Spec, Vm, VmTemplate

Loc = tuple[str | int, ...]
Found = Iterator[tuple[Loc, str]]


def board_problems(spec: Spec) -> Found:
    """A board's GPUs carry unique module IDs, no bridges, and its partitions name them."""
    for p_index, profile in enumerate(spec.hardware_profiles):
        base: Loc = ("hardware_profiles", p_index)
        if profile.board is None:
            for index, gpu in enumerate(profile.gpus):
                if gpu.module_id is not None:
                    yield (
                        (*base, "gpus", index, "module_id"),
                        "module_id is for the SXM modules of a board: describe the board"
                        " (hardware_profiles[].board) or drop module_id",
                    )
                    return
            continue
        ids = Counter(g.module_id for g in profile.gpus)
        for index, gpu in enumerate(profile.gpus):
            loc = (*base, "gpus", index)
            if gpu.module_id is None:
                yield (
                    (*loc, "module_id"),
                    f"GPU {gpu.pci} sits on board {profile.board.name!r}: give its SXM module ID"
                    " (nvidia-smi -q, 'Module ID'), which the Fabric Manager partitions use",
                )
                return
            if ids[gpu.module_id] > 1:
                yield ((*loc, "module_id"), f"module ID {gpu.module_id} appears twice")
                return
            if gpu.nvlink_peer is not None:
                yield (
                    (*loc, "nvlink_peer"),
                    "the GPUs of an NVSwitch board are joined by its NVSwitches, not by a bridge:"
                    " drop nvlink_peer",
                )
                return
        yield from _partition_problems(profile.board, set(ids), base)


def _partition_problems(board: Board, modules: set[int | None], base: Loc) -> Found:
    seen: set[int] = set()
    for index, part in enumerate(board.partitions):
        loc = (*base, "board", "partitions", index)
        if part.id in seen:
            yield ((*loc, "id"), f"partition ID {part.id} appears twice")
            return
        seen.add(part.id)
        missing = [m for m in part.modules if m not in modules]
        if missing or len(set(part.modules)) != len(part.modules):
            what = f"names module {missing[0]}, not" if missing else "repeats a module of"
            yield (
                (*loc, "modules"),
                f"partition {part.id} {what} this profile's GPUs: list the board's own"
                " partitions (the default is the 8-GPU HGX H100/H200 table of NVIDIA's Fabric"
                " Manager User Guide)",
            )
            return


def _candidate_hosts(spec: Spec, vm: Vm) -> list[tuple[int, Host]]:
    if vm.host == "auto":
        return list(enumerate(spec.hosts))
    return [(i, h) for i, h in enumerate(spec.hosts) if h.name == vm.host]


def vm_problems(spec: Spec) -> Found:
    """Each VM against the board of every host it may land on, then partitions across VMs."""
    templates = {t.name: (i, t) for i, t in enumerate(spec.vm_templates)}
    for index, vm in enumerate(spec.vms):
        t_index, tmpl = templates[vm.template]
        for h_index, host in _candidate_hosts(spec, vm):
            board = spec.profile(host.profile).board
            if board is None:
                if vm.device_group is not None and vm.host != "auto":
                    yield (
                        ("vms", index, "device_group"),
                        f"device_group names a Fabric Manager partition, and host {host.name!r}"
                        " has no NVSwitch board (a PCIe NVLink pair is asked for by size:"
                        " 2 GPUs, nvlink: required)",
                    )
                    return
                continue
            if tmpl.gpus == 0:
                continue
            found = list(_vm_on_board(spec, vm, index, tmpl, t_index, host, h_index, board))
            if found:
                yield found[0]
                return
    yield from _shared_partitions(spec)


def _vm_on_board(
    spec: Spec,
    vm: Vm,
    index: int,
    tmpl: VmTemplate,
    t_index: int,
    host: Host,
    h_index: int,
    board: Board,
) -> Found:
    where = f"VM {vm.name!r} on host {host.name!r} ({board.name})"
    decision = decide(
        GpuKind.nvswitch, host_line(spec.vcenter.version, host.esxi_version), tmpl.gpu_mode
    )
    if decision.refusal == NVAIE_NVSWITCH:
        yield (
            ("vm_templates", t_index, "gpu_mode"),
            f"{where}: {NVAIE_NVSWITCH}; set gpu_mode: vgpu with a vgpu_profile",
        )
        return
    if decision.refusal == DEVICE_GROUP_API:
        stale_vc = spec.vcenter.version.startswith("7.")
        loc: Loc = ("vcenter", "version") if stale_vc else ("hosts", h_index, "esxi_version")
        what = f"vCenter {spec.vcenter.version}" if stale_vc else f"ESXi {host.esxi_version}"
        yield (
            loc,
            f"{where} takes its GPUs as a vendor device group, and {what} cannot: "
            f"{DEVICE_GROUP_API}; run vSphere 8.0.x",
        )
        return
    if tmpl.gpus not in board.sizes():
        sizes = ", ".join(str(n) for n in board.sizes())
        yield (
            ("vm_templates", t_index, "gpus"),
            f"{where}: the board's Fabric Manager partitions hold {sizes} GPU(s), not"
            f" {tmpl.gpus}; a VM takes one whole partition",
        )
        return
    if vm.allow_split_pair:
        yield (
            ("vms", index, "allow_split_pair"),
            f"{where}: vGPUs that talk peer to peer must be in one VM (NVIDIA AI Enterprise), so"
            " P2P across VMs is refused and a VM takes a whole partition; drop allow_split_pair",
        )
        return
    yield from _named_partition(spec, vm, index, tmpl, host, board, where)


def _named_partition(
    spec: Spec, vm: Vm, index: int, tmpl: VmTemplate, host: Host, board: Board, where: str
) -> Found:
    profile = spec.profile(host.profile)
    if vm.gpus:
        modules = sorted(g.module_id or 0 for g in profile.gpus if g.pci in vm.gpus)
        if not any(sorted(p.modules) == modules for p in board.partitions):
            yield (
                ("vms", index, "gpus"),
                f"{where}: GPUs {', '.join(vm.gpus)} are not one Fabric Manager partition, and"
                " P2P across VMs is refused (NVIDIA AI Enterprise); name a partition with"
                " device_group instead",
            )
        return
    if vm.device_group is None:
        return
    if vm.host == "auto":
        yield (
            ("vms", index, "device_group"),
            "a named device_group needs a named host, not 'auto'",
        )
        return
    part = board.partition(int(vm.device_group.split("-")[1]))
    if part is None:
        ids = ", ".join(str(p.id) for p in board.partitions)
        yield (
            ("vms", index, "device_group"),
            f"{where}: the board has no {vm.device_group} (partition IDs {ids})",
        )
    elif len(part.modules) != tmpl.gpus:
        yield (
            ("vms", index, "device_group"),
            f"{where}: {part.name} holds {len(part.modules)} GPU(s), template {tmpl.name!r}"
            f" asks for {tmpl.gpus}",
        )


def _shared_partitions(spec: Spec) -> Found:
    """Two VMs whose named partitions share a module would do P2P across VMs: refused."""
    taken: dict[tuple[str, int], tuple[str, str]] = {}
    for index, vm in enumerate(spec.vms):
        if vm.device_group is None or vm.host == "auto":
            continue
        board = spec.host_profile(vm.host).board
        part = board.partition(int(vm.device_group.split("-")[1])) if board else None
        if part is None:
            continue
        for module in part.modules:
            other = taken.get((vm.host, module))
            if other:
                yield (
                    ("vms", index, "device_group"),
                    f"{part.name} (modules {', '.join(map(str, part.modules))}) shares module"
                    f" {module} with {other[1]} of VM {other[0]!r} on host {vm.host!r}: a"
                    " partition's GPUs talk peer to peer, and P2P across VMs is refused"
                    " (NVIDIA AI Enterprise)",
                )
                return
            taken[(vm.host, module)] = (vm.name, part.name)
