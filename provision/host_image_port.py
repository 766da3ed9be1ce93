"""The upgrade's host-image port over vLCM, in the spec's terms.

The upgrade (`rackcert upgrade`) speaks of a host's image as the spec does: `esxi` (a release
such as 7.0.3, or a full base image version such as 7.0.3-0.35.19482537), `vgpu_manager` (the
NVIDIA manager's version, 535.161.05) and other components by a short name (`nmlx5`: 4.23.0.66).
vLCM speaks in its depot's terms: a base image version, components by their full names
(NVD-AIE_ESXi_7.0.2_Driver, Mellanox-nmlx5) at full versions (535.161.05-1OEM.702.0.0.17630552).
`VlcmHostImage` translates both ways through the depot's content:

    port = VlcmHostImage(spec)                  # the spec's vcenter; its cluster (or the only one)
    port.current("esx01.example.internal")      # {"esxi": "7.0.3", "vgpu_manager": "535.154.02"}
    port.apply("esx01.example.internal", {"esxi": "7.0.3-0.35.19482537", "vgpu_manager": ...})

`apply` commits the desired state when it differs (one commit for the whole roll: the first
host's apply stages, later hosts find it committed) and remediates that host alone. vLCM's
remediation includes the host's reboot; the host must already be in maintenance mode with its
VMs down (the roll's earlier steps), or vLCM refuses it. A second remediation of the same
cluster waits until the first ends (vLCM runs one per cluster), within `timeout_s`.
Each call opens its own Automation API session, so a roll of hours outlives no session.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from provision.host_image import HostImage, HostImageError, Image
from rackcert.core.spec import Spec

ESXI = "esxi"
VGPU_MANAGER = "vgpu_manager"
# NVIDIA's host driver components (vendor NVD): NVD-AIE_ESXi_7.0.2_Driver, NVD-AIE-800_...
_VGPU_COMPONENT = re.compile(r"^NVD[-_]", re.IGNORECASE)
T = TypeVar("T")


class VlcmHostImage:
    """current(host) / apply(host, versions) for the upgrade, through vLCM."""

    def __init__(self, spec: Spec, *, cluster: str | None = None, timeout_s: float = 3600) -> None:
        self._spec = spec
        self._cluster = cluster or spec.vcenter.cluster
        self._timeout_s = timeout_s
        # vLCM keeps one draft per user: hosts applied at once from this roll stage in turn,
        # and the second finds the first's commit.
        self._stage_lock = threading.Lock()
        self._aliases: dict[str, str] = {}  # spec short name -> vLCM component, as applied

    def _open(self) -> HostImage:
        return HostImage(self._spec, poll_s=1.0)

    def _cluster_of(self, image: HostImage, host: str) -> str:
        if self._cluster:
            return self._cluster
        names = image.clusters()
        if len(names) == 1:
            self._cluster = names[0]
            return names[0]
        raise HostImageError(
            f"{host}: vCenter has {len(names)} clusters and the spec names none"
            " (vcenter.cluster): name the one whose image vLCM manages"
        )

    def _address(self, host: str) -> str:
        """The name vCenter knows the host by (the spec's address), from a spec host name."""
        return next((h.address for h in self._spec.hosts if h.name == host), host)

    def _esxi_asked(self, host: str) -> str:
        return next((h.esxi_version for h in self._spec.hosts if host in (h.name, h.address)), "")

    def current(self, host: str) -> dict[str, str]:
        """What the host runs (vLCM's compliance scan; esxcli on baselines), in the spec's terms."""
        with self._open() as image:
            cluster = self._cluster_of(image, host)
            if not image.managed(cluster):
                return self._esxcli_current(host)
            seen = image.compliance(cluster)
            address = self._address(host)
            if address not in seen:
                raise HostImageError(f"{host}: not a host of cluster {cluster}")
            return self._spec_terms(host, seen[address].running)

    def apply(self, host: str, versions: dict[str, str]) -> None:
        """Remediate the host to `versions` (spec terms); returns once vLCM's task succeeded."""
        deadline = time.monotonic() + self._timeout_s
        with self._open() as image:
            cluster = self._cluster_of(image, host)
            if not image.managed(cluster):
                self._esxcli_apply(host, cluster, versions)
                return
            with self._stage_lock:
                desired = image.desired(cluster)
                target = self._vlcm_terms(image, desired, versions)
                if target != desired:
                    changes: dict[str, str | None] = dict(target.components)
                    changes |= {n: None for n in desired.components if n not in target.components}
                    self._retry(
                        lambda: image.stage(cluster, base=target.base, components=changes),
                        deadline,
                    )
            address = self._address(host)
            self._retry(lambda: image.apply(cluster, [address], deadline=deadline), deadline)

    # --- a cluster managed by baselines: esxcli on the host ---

    def _esxcli_current(self, host: str) -> dict[str, str]:
        """The host's image from `esxcli software vib list`: esx-base, NVIDIA's manager, the
        other vendors' VIBs (by VIB name and by the spec's short names)."""
        from provision.esxcli import host_facts
        from provision.session import connect

        with connect(self._spec) as si:
            facts, _ = host_facts(si, self._host_object(si, host)._moId)
        if not facts.answered:
            raise HostImageError(f"{host}: esxcli did not answer ({facts.error})")
        base = next((v.version for v in facts.vibs if v.name == "esx-base"), "")
        components = {
            v.name: v.version
            for v in facts.vibs
            if v.vendor not in ("VMware", "VMW") and v.name != "esx-base"
        }
        return self._spec_terms(host, Image(base=base, components=components))

    def _esxcli_apply(self, host: str, cluster: str, versions: dict[str, str]) -> None:
        """On baselines rackcert moves the vGPU manager alone, from the spec's offline bundle
        (`esxcli software vib install -d`, in maintenance mode; the reboot is the roll's)."""
        from provision.esxcli import EsxcliError, vib_install
        from provision.session import connect

        now = self._esxcli_current(host)
        pending = sorted(k for k, v in versions.items() if now.get(k) != v)
        if not pending:
            return
        source = self._spec.host_software.vgpu_manager
        if pending != [VGPU_MANAGER] or source is None:
            raise HostImageError(
                f"{host}: cluster {cluster} is managed by baselines, not a vLCM image: rackcert"
                " changes only the vGPU manager there (host_software.vgpu_manager.depot);"
                f" {', '.join(k for k in pending if k != VGPU_MANAGER) or VGPU_MANAGER} need the"
                " cluster managed by an image, or `esxcli software profile update` by hand"
            )
        with connect(self._spec) as si:
            try:
                vib_install(self._host_object(si, host), source.depot)
            except EsxcliError as exc:
                raise HostImageError(f"{host}: esxcli software vib install: {exc}") from None
        got = self._esxcli_current(host).get(VGPU_MANAGER)
        if got != versions[VGPU_MANAGER]:
            raise HostImageError(
                f"{host}: {source.depot} installed vGPU manager {got or 'none'}, not"
                f" {versions[VGPU_MANAGER]}: the spec's bundle and version disagree"
            )

    def _host_object(self, si: Any, host: str) -> Any:
        from pyVmomi import vim

        address = self._address(host)
        content = si.RetrieveContent()
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.HostSystem], True)
        try:
            found = next((h for h in view.view if h.name == address), None)
        finally:
            view.DestroyView()
        if found is None:
            raise HostImageError(f"{host}: vCenter has no host {address}")
        return found

    # --- terms ---

    def _spec_terms(self, host: str, running: Image) -> dict[str, str]:
        wanted = self._esxi_asked(host)
        out = {ESXI: running.base if "-" in wanted else running.base.split("-", 1)[0]}
        asked: dict[str, str] = dict(getattr(self._spec.host_software, "components", None) or {})
        for name, version in running.components.items():
            short = version.split("-", 1)[0]
            if _VGPU_COMPONENT.match(name):
                out[VGPU_MANAGER] = short
                continue
            out[name] = version  # vLCM's own name and version, always
            keys = {k for k in asked if _same_component(k, name)}
            keys |= {k for k, n in self._aliases.items() if n == name}
            for key in keys:
                out[key] = version if "-" in asked.get(key, "") else short
        return out

    def _vlcm_terms(self, image: HostImage, desired: Image, versions: dict[str, str]) -> Image:
        depot = image.depot_components()
        base = desired.base
        components = dict(desired.components)
        for key, value in versions.items():
            if key == ESXI:
                base = _pick(value, image.base_images(), f"ESXi base image {value}")
                continue
            if key == VGPU_MANAGER:
                names = [n for n in [*desired.components, *depot] if _VGPU_COMPONENT.match(n)]
            else:
                names = [n for n in [*desired.components, *depot] if _same_component(key, n)]
            if not names:
                raise HostImageError(f"component {key} {value}: the depot holds no such component")
            name = names[0]
            components[name] = _pick(value, depot.get(name, []), f"component {name} {value}")
            self._aliases[key] = name
        return Image(base=base, components=components)

    def _retry(self, step: Callable[[], T], deadline: float) -> T:
        """Run a vLCM step; while another remediation of the cluster runs, wait for it."""
        pause = 1.0
        while True:
            try:
                return step()
            except HostImageError as exc:
                if exc.kind != "not_allowed_in_current_state" or time.monotonic() >= deadline:
                    raise
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 15.0)


def _same_component(short: str, name: str) -> bool:
    """A spec's short name (nmlx5) names a vLCM component (Mellanox-nmlx5) it is part of."""
    return short == name or short.lower() in re.split(r"[-_]", name.lower())


def _pick(value: str, versions: list[str], what: str) -> str:
    """The depot version the spec's value means: itself, else the newest of that prefix."""
    if value in versions:
        return value
    matches = [v for v in versions if v.split("-", 1)[0] == value]
    if not matches:
        raise HostImageError(f"{what}: not in the depot (it holds {', '.join(versions) or 'none'})")
    return matches[-1]  # the depot lists oldest first
