"""Cross-field rules of the spec: what one field cannot say about another.

Each rule yields `Problem`s with a location path into the YAML document, so the
loader can point at the file and line. Rules run in order and stop at the first
broken reference, because later rules would only repeat the same mistake.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from rackcert.core.ansible_vars import ansible_var_problems
from rackcert.core.hgx_rules import board_problems, vm_problems
from rackcert.core.placement import PlacementError, place
from rackcert.core.spec import NvlinkPolicy, Spec

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    loc: Loc
    message: str


def _duplicates(values: Iterable[str]) -> set[str]:
    return {v for v, n in Counter(values).items() if n > 1}


def _dup_names(spec: Spec) -> Iterator[Problem]:
    for key, items in (
        ("hardware_profiles", spec.hardware_profiles),
        ("hosts", spec.hosts),
        ("vm_templates", spec.vm_templates),
        ("vms", spec.vms),
    ):
        dups = _duplicates(i.name for i in items)
        for index, item in enumerate(items):
            if item.name in dups:
                yield Problem((key, index, "name"), f"duplicate name {item.name!r} in {key}")
                break
    dups = _duplicates(h.address for h in spec.hosts)
    for index, host in enumerate(spec.hosts):
        if host.address in dups:
            yield Problem(("hosts", index, "address"), f"duplicate host address {host.address!r}")
            break
    dups = _duplicates(f"{v.address}:{v.ssh_port}" for v in spec.vms)
    for index, vm in enumerate(spec.vms):
        if f"{vm.address}:{vm.ssh_port}" in dups:
            yield Problem(("vms", index, "address"), f"duplicate VM address {vm.address!r}")
            break


def _dup_pci(spec: Spec) -> Iterator[Problem]:
    for p_index, profile in enumerate(spec.hardware_profiles):
        devices = [("gpus", i, g.pci) for i, g in enumerate(profile.gpus)]
        devices += [("nics", i, n.pci) for i, n in enumerate(profile.nics)]
        dups = _duplicates(pci for _, _, pci in devices)
        for kind, index, pci in devices:
            if pci in dups:
                yield Problem(
                    ("hardware_profiles", p_index, kind, index, "pci"),
                    f"PCI address {pci} appears twice in profile {profile.name!r}",
                )
                break


def _references(spec: Spec) -> Iterator[Problem]:
    profiles = {p.name for p in spec.hardware_profiles}
    hosts = {h.name for h in spec.hosts}
    templates = {t.name for t in spec.vm_templates}
    for index, host in enumerate(spec.hosts):
        if host.profile not in profiles:
            yield Problem(("hosts", index, "profile"), f"unknown hardware profile {host.profile!r}")
    for index, vm in enumerate(spec.vms):
        if vm.template not in templates:
            yield Problem(("vms", index, "template"), f"unknown VM template {vm.template!r}")
        if vm.host != "auto" and vm.host not in hosts:
            yield Problem(("vms", index, "host"), f"unknown host {vm.host!r} (or use 'auto')")
        if vm.gpus and vm.host == "auto":
            yield Problem(("vms", index, "gpus"), "explicit gpus need a named host, not 'auto'")


def _nvlink_symmetry(spec: Spec) -> Iterator[Problem]:
    for p_index, profile in enumerate(spec.hardware_profiles):
        by_pci = {g.pci: g for g in profile.gpus}
        for index, gpu in enumerate(profile.gpus):
            if gpu.nvlink_peer is None:
                continue
            loc = ("hardware_profiles", p_index, "gpus", index, "nvlink_peer")
            peer = by_pci.get(gpu.nvlink_peer)
            if gpu.nvlink_peer == gpu.pci:
                yield Problem(loc, f"GPU {gpu.pci} names itself as its NVLink peer")
            elif peer is None:
                yield Problem(loc, f"NVLink peer {gpu.nvlink_peer} is not a GPU of this profile")
            elif peer.nvlink_peer != gpu.pci:
                yield Problem(
                    loc,
                    f"nvlink_peer must be symmetric: {gpu.pci} -> {peer.pci}"
                    f" but {peer.pci} -> {peer.nvlink_peer}",
                )


def _boards(spec: Spec) -> Iterator[Problem]:
    for loc, message in board_problems(spec):
        yield Problem(loc, message)


def _device_groups(spec: Spec) -> Iterator[Problem]:
    """HGX VMs: vGPU only, vSphere 8, a partition size the board has, no P2P across VMs."""
    for loc, message in vm_problems(spec):
        yield Problem(loc, message)


def _templates(spec: Spec) -> Iterator[Problem]:
    for index, tmpl in enumerate(spec.vm_templates):
        if tmpl.nvlink is NvlinkPolicy.required and tmpl.gpus != 2:
            yield Problem(
                ("vm_templates", index, "nvlink"),
                "nvlink: required needs exactly 2 GPUs (an NVLink bridge joins a pair),"
                f" not {tmpl.gpus}",
            )
        if tmpl.gpu_mode == "vgpu" and not tmpl.vgpu_profile:
            yield Problem(
                ("vm_templates", index, "vgpu_profile"), "gpu_mode: vgpu needs a vgpu_profile"
            )
    for index, vm in enumerate(spec.vms):
        tmpl = next((t for t in spec.vm_templates if t.name == vm.template), None)
        if tmpl and vm.gpus is not None and len(vm.gpus) != tmpl.gpus:
            yield Problem(
                ("vms", index, "gpus"),
                f"{len(vm.gpus)} GPU(s) listed but template {tmpl.name!r} asks for {tmpl.gpus}",
            )


def _guest_network(spec: Spec) -> Iterator[Problem]:
    """A cloned VM gets vms[].address as its static address (cloud-init): it must be an IP."""
    mgmt = spec.network.management
    sources = {t.name for t in spec.vm_templates if t.source}
    for index, vm in enumerate(spec.vms):
        if vm.template not in sources:
            continue
        try:
            iface = ipaddress.ip_interface(f"{vm.address}/{mgmt.prefix}")
        except ValueError:
            yield Problem(
                ("vms", index, "address"),
                f"{vm.address!r} must be an IP address: a VM cloned from a template gets it"
                " as its static address through cloud-init",
            )
            continue
        if mgmt.gateway:
            try:
                inside = ipaddress.ip_address(mgmt.gateway) in iface.network
            except ValueError:
                inside = False
            if not inside:
                yield Problem(
                    ("network", "management", "gateway"),
                    f"gateway {mgmt.gateway} is not in {iface.network}, the network of"
                    f" vms[{index}].address {vm.address}/{mgmt.prefix}",
                )
                return


def _capacity(spec: Spec) -> Iterator[Problem]:
    """More GPUs pinned to a host than its profile has: said plainly, before placement."""
    by_host: Counter[str] = Counter()
    templates = {t.name: t for t in spec.vm_templates}
    for index, vm in enumerate(spec.vms):
        if vm.host == "auto":
            continue
        by_host[vm.host] += templates[vm.template].gpus
        have = len(spec.host_profile(vm.host).gpus)
        if by_host[vm.host] > have:
            yield Problem(
                ("vms", index, "host"),
                f"host {vm.host!r} has {have} GPU(s) but its VMs ask for {by_host[vm.host]}",
            )
            return


def _placement(spec: Spec) -> Iterator[Problem]:
    try:
        place(spec)
    except PlacementError as exc:
        yield Problem(("vms", exc.problem.vm_index, exc.problem.field), exc.problem.message)


def _ansible_vars(spec: Spec) -> Iterator[Problem]:
    for name, message in ansible_var_problems(spec):
        yield Problem(("guest", "ansible_vars", name), message)


RULES = (
    _dup_names,
    _dup_pci,
    _references,
    _nvlink_symmetry,
    _boards,
    _templates,
    _device_groups,
    _guest_network,
    _capacity,
    _placement,
    _ansible_vars,
)


def find_problems(spec: Spec) -> list[Problem]:
    """All rule violations, stopping after the first rule group that finds any."""
    for rule in RULES:
        problems = list(rule(spec))
        if problems:
            return problems
    return []
