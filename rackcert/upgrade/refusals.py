"""What the roll will not do, each as one line: the plan shows them all, and any one of them
makes `rackcert upgrade` exit 2 before it touches a node.

- Not an upgrade: the hosts, VMs or their placement differ from the certified run's spec
  (that is provision's work, not a roll's).
- Each layer's own refusals (rackcert.core.upgrade_layers): the guest's is a driver of a
  newer branch than the hosts' vGPU manager, on a rack with vGPU VMs:
  NVIDIA supports a manager of the same or a newer branch than the guest driver, never the
  reverse (vGPU release notes, "Driver versions").
- A target version the certified matrix does not list (validation/certified/, the spec's
  certification.reference), unless --allow-uncertified: then it is recorded and reported.
- A host whose nodes no budget can take out (budget.unfreeable).
- A start run whose verdict is not PASS, unless --allow-uncertified-start (start.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rackcert.core.matrix import Reference
from rackcert.core.spec import Spec
from rackcert.core.upgrade_layers import Change, layer_names, layers
from rackcert.core.upgrade_layers.guest import branch, driver_branch

__all__ = ["Refusals", "branch", "driver_branch", "layered", "matrix", "shape_differences"]


def matrix_names() -> dict[str, str]:
    """The certified matrix's component name for each component a roll moves, where the
    layer's own name differs (the layers declare them)."""
    return {k: v for la in layers() for k, v in la.matrix_names.items()}


@dataclass
class Refusals:
    errors: list[str] = field(default_factory=list)
    uncertified: list[str] = field(default_factory=list)
    uncertified_start: list[str] = field(default_factory=list)  # rackcert.upgrade.start

    def blocking(self, allow_uncertified: bool, allow_uncertified_start: bool = False) -> list[str]:
        return (
            self.errors
            + ([] if allow_uncertified else self.uncertified)
            + ([] if allow_uncertified_start else self.uncertified_start)
        )


def shape_differences(before: Spec, after: Spec) -> list[str]:
    """The rack itself changed (hosts, VMs, where they run): not a roll's to do."""
    out = []
    if before.metadata.name != after.metadata.name:
        out.append(
            f"the spec names rack {after.metadata.name!r}, its certified run is of"
            f" {before.metadata.name!r}"
        )
    old_hosts, new_hosts = {h.name for h in before.hosts}, {h.name for h in after.hosts}
    if old_hosts != new_hosts:
        out.append(
            "hosts differ from the certified run's spec"
            f" (added {sorted(new_hosts - old_hosts)}, removed {sorted(old_hosts - new_hosts)}):"
            " provision them, certify, then upgrade"
        )
    old_vms = {v.name: (v.host, v.template) for v in before.vms}
    new_vms = {v.name: (v.host, v.template) for v in after.vms}
    if old_vms != new_vms:
        names = old_vms.keys() | new_vms.keys()
        moved = sorted(n for n in names if old_vms.get(n) != new_vms.get(n))
        out.append(
            f"VMs differ from the certified run's spec ({', '.join(moved)}): an upgrade moves"
            " versions only; provision the change, certify, then upgrade"
        )
    return out


def layered(before: Spec, after: Spec, changes: list[Change]) -> list[str]:
    """Each registered layer's own refusals (the guest's driver branch rule, ...)."""
    unknown = [
        f"upgrade.layers.{name}: no upgrade layer of that name is registered"
        for name in after.upgrade.layers
        if name not in layer_names()
    ]
    return unknown + [
        line for la in layers() for refuse in la.refusals for line in refuse(before, after, changes)
    ]


def matrix(after: Spec, changes: list[Change], ref: Reference | None, where: str) -> list[str]:
    """Each target version the certified matrix entry does not allow, one line each."""
    if not changes:
        return []
    wanted = after.certification.reference
    if ref is None:
        what = f"entry {wanted!r} is not in {where}" if wanted else "no entry is chosen"
        return [
            f"the certified matrix cannot vouch for the new versions: {what}"
            " (certification.reference); add an entry, or pass --allow-uncertified"
        ]
    rules = {r.component: r for r in ref.components}
    out = []
    for change in changes:
        names = matrix_names()
        rule = rules.get(names.get(change.component, change.component))
        if rule is None or change.after is None:
            continue
        if not rule.holds(change.after):
            out.append(
                f"{change.component} {change.after} is not in certified-matrix entry {ref.id}"
                f" ({rule.label or rule.component}: {rule.expected()}); pass --allow-uncertified"
                " to roll it anyway (the record and report will say so)"
            )
    return out
