"""Which VM in vCenter is the one rackcert made for a spec VM, whatever its name now.

Why: a name is not an identity. A run killed after its clone finished, or an operator who
renamed a VM, leaves a VM that a plan by name does not see; cloning again would double it.
So each VM rackcert clones gets an instance UUID derived from the rack's and the VM's
names, the same in every run on every machine, and apply looks it up before a clone
(provision/lifecycle.py).
"""

from __future__ import annotations

import uuid


def instance_uuid(rack: str, vm: str) -> str:
    """The instance UUID rackcert gives VM `vm` of rack `rack`: the same in every run, so a
    re-run (from any machine) finds the VM it made whatever its name has become since.

    vCenter takes `ConfigSpec.instanceUuid` at creation (vSphere API reference,
    VirtualMachineConfigSpec.instanceUuid: "VirtualCenter-specific 128-bit UUID of a virtual
    machine"; vCenter keeps it unless it finds two VMs with one), and it is not the BIOS UUID
    (config.uuid) that the guest sees.

        >>> instance_uuid("rack1", "node001-0")
        'e40c144f-897f-567e-b0cf-3a1cc703de1e'
    """
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"rackcert://{rack}/vms/{vm}"))
