"""What the roll will not do, each as one line: the plan shows them all, and any one of them
makes `rackcert upgrade` exit 2 before it touches a node.

- Not an upgrade: the hosts, VMs or their placement differ from the certified run's spec
  (that is provision's work, not a roll's).
- A guest driver of a newer branch than the hosts' vGPU manager, on a rack with vGPU VMs:
  NVIDIA supports a manager of the same or a newer branch than the guest driver, never the
  reverse (vGPU release notes, "Driver versions").
- A target version the certified matrix does not list (validation/certified/, the spec's
  certification.reference), unless --allow-uncertified: then it is recorded and reported.
- A host whose nodes no budget can take out (budget.unfreeable).
- A start run whose verdict is not PASS, unless --allow-uncertified-start (start.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rackcert.core.matrix import Reference
from rackcert.core.spec import Spec
from rackcert.upgrade.layers import ESXI, VGPU_MANAGER, Change, uses_vgpu

# The certified matrix's component name for each component a roll moves.
MATRIX_NAMES = {ESXI: "esxi_version", VGPU_MANAGER: "vgpu_manager"}


def branch(version: str | None) -> int | None:
    """A driver's branch, its major number (550.127.06 -> 550; R535 -> 535)."""
    match = re.search(r"\d+", version or "")
    return int(match.group()) if match else None


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


def driver_branch(after: Spec, changes: list[Change]) -> list[str]:
    """A guest driver newer than the hosts' vGPU manager, where VMs use vGPUs."""
    if not uses_vgpu(after):
        return []
    touched = {c.component for c in changes}
    if not touched & {"nvidia_driver", VGPU_MANAGER}:
        return []
    guest, manager = after.guest.nvidia_driver, after.host_software.vgpu_manager_version
    if guest and not manager:
        return [
            "the rack's VMs use vGPUs and the guest driver changes, but"
            " host_software.vgpu_manager_version is not given: name the hosts' vGPU manager"
            " so the branch rule (manager same or newer than the guest) can be checked"
        ]
    g, m = branch(guest), branch(manager)
    if g is not None and m is not None and g > m:
        return [
            f"guest driver {guest} (R{g}) is of a newer branch than the hosts' vGPU manager"
            f" {manager} (R{m}); NVIDIA supports the reverse only: upgrade the manager to R{g}"
            " or newer in the same spec"
        ]
    return []


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
        rule = rules.get(MATRIX_NAMES.get(change.component, change.component))
        if rule is None or change.after is None:
            continue
        if not rule.holds(change.after):
            out.append(
                f"{change.component} {change.after} is not in certified-matrix entry {ref.id}"
                f" ({rule.label or rule.component}: {rule.expected()}); pass --allow-uncertified"
                " to roll it anyway (the record and report will say so)"
            )
    return out
