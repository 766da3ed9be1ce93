"""The lab twin's vLCM depot: the next patch of the lab's ESXi release and a newer nmlx5.

Why: `rackcert upgrade` moves a rack to what its site's depot holds, and a new user trying a roll
on the lab needs something to move to. A site's vLCM depot (VMware's online depot, or an offline
bundle imported into vCenter) is read from its metadata: `index.xml` names the vendors'
`vendor-index.xml`, whose `metadata.zip` holds the bulletins, the base images and the
components, each with its version, display version and release date (VMware vSphere Lifecycle
Manager documentation, "Working with vSphere Lifecycle Manager Depots"; the Automation API shows
the same through com.vmware.esx.settings.depot_content BaseImages.list and Components.list).
The lab's depot holds, beside what its hosts run (ESXi 7.0 U3c, 7.0.3-0.20.19193900, and the
inbox nmlx5 4.19.16.11):

- ESXi 7.0 Update 3d, base image 7.0.3-0.35.19482537, released 2022-03-29 (VMware ESXi 7.0
  Update 3d release notes: ISO build 19482537; image profile ESXi-7.0U3d-19482537-standard);
- NVIDIA's async ConnectX driver as the vLCM component `Mellanox-nmlx5`
  4.23.0.66-1OEM.703.0.0.18434556 (vendor MEL, VIBs nmlx5-core and nmlx5-rdma), which replaces
  the inbox nmlx5 VIBs of the same names, as the component does on a host.

The cluster is managed by a single image (vLCM): a 7.0 U3 cluster may be converted from
baselines, and the twin's default for 7.0.3 is baselines (twin/vlcm.go), so the lab says so.

Example:
    desc["vlcm"] = lab_depot(spec)    # the description `rackcert lab up` starts the twin with
"""

from __future__ import annotations

from typing import Any

ESXI_NEXT = "7.0.3-0.35.19482537"  # ESXi 7.0 U3d
ESXI_NEXT_DISPLAY = "7.0 U3d"
ESXI_NEXT_RELEASED = "2022-03-29"
NMLX5 = "Mellanox-nmlx5"
NMLX5_NEXT = "4.23.0.66-1OEM.703.0.0.18434556"
NMLX5_NEXT_SHORT = "4.23.0.66"  # as the spec names it (host_software.components.nmlx5)


LAB_RELEASE = "7.0.3"  # the ESXi release the lab's hosts run (inventories/lab.yaml)


def lab_depot(spec: Any) -> dict[str, Any] | None:
    """The twin description's `vlcm` block for a lab of ESXi 7.0.3 hosts: image-managed, with
    the depot above; None for a spec of another release (its depot is not this one)."""
    if any(h.esxi_version != LAB_RELEASE for h in spec.hosts):
        return None
    return {
        "image_managed": True,
        "base_images": [
            {
                "version": ESXI_NEXT,
                "display_version": ESXI_NEXT_DISPLAY,
                "release_date": ESXI_NEXT_RELEASED,
            }
        ],
        "components": [
            {
                "name": NMLX5,
                "version": NMLX5_NEXT,
                "vendor": "MEL",
                "display_version": NMLX5_NEXT_SHORT,
                "vibs": ["nmlx5-core", "nmlx5-rdma"],
            }
        ],
    }
