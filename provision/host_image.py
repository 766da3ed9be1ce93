"""The host image step of an upgrade, through vLCM (com.vmware.esx.settings).

A cluster managed by a single image has one desired state (an ESXi base image and components
such as the NVIDIA vGPU manager and the nmlx5 driver); vLCM brings hosts to it. This module is
the small surface the upgrade needs:

    with HostImage(spec) as image:
        image.managed("cluster0")                    # False: baselines, use esxcli (baselines.py)
        before = image.desired("cluster0")          # Image(base=..., components={...})
        staged = image.stage("cluster0", base="7.0.3-0.35.19482537",
                             components={"NVD-AIE_ESXi_7.0.2_Driver": "535.161.05-..."})
        image.compliance("cluster0")                # host name -> HostCompliance (a scan)
        image.apply("cluster0", ["esx01.example"], deadline=time.monotonic() + 3600)
        image.rollback("cluster0", staged.previous)  # the image before, committed again

`stage` returns the desired state it replaced (record it: rollback needs it, and vLCM keeps old
commits only as history, not as something to apply). `apply` waits on vLCM's task until the
deadline and raises HostImageError naming the hosts that failed and why (a host vLCM cannot put
in maintenance mode, for one). What a host runs afterwards reads back from `compliance` (each
host's current base image and components) and from the host itself (config.product,
`esxcli software vib list`: provision.esxcli.host_facts).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from provision.vapi import VapiError, VapiSession, opt, st, vmap
from rackcert.core.errors import RackcertError
from rackcert.core.spec import Spec

SW = "com.vmware.esx.settings.clusters.software"


class HostImageError(RackcertError):
    """vLCM refused or failed a host image step; the message is one line naming what, and
    `kind` the vAPI error type when vCenter gave one (not_allowed_in_current_state, ...)."""

    exit_code = 1

    def __init__(self, message: str, kind: str = "") -> None:
        super().__init__(message)
        self.kind = kind

    @classmethod
    def of(cls, exc: VapiError) -> HostImageError:
        return cls(str(exc), exc.kind)


@dataclass(frozen=True)
class Image:
    """A desired (or running) image: base image version and component versions."""

    base: str
    components: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"base": self.base, "components": dict(sorted(self.components.items()))}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Image:
        return cls(base=str(data["base"]), components=dict(data.get("components") or {}))


@dataclass(frozen=True)
class Staged:
    """A committed desired state: its commit id and the image it replaced."""

    commit: str
    previous: Image
    image: Image


@dataclass(frozen=True)
class HostCompliance:
    """One host against the cluster's latest commit."""

    host: str
    status: str  # COMPLIANT, NON_COMPLIANT, INCOMPATIBLE, UNAVAILABLE
    impact: str  # NO_IMPACT, MAINTENANCE_MODE_REQUIRED, REBOOT_REQUIRED, ...
    running: Image


@dataclass(frozen=True)
class Applied:
    """An apply that succeeded: which hosts changed, which were compliant already."""

    commit: str
    remediated: list[str]
    skipped: list[str]


class HostImage:
    """vLCM for the spec's vCenter: `with HostImage(spec) as image: ...`."""

    def __init__(self, spec: Spec, *, timeout: float = 30, poll_s: float = 2.0) -> None:
        self._api = VapiSession(spec, timeout=timeout)
        self._poll_s = poll_s
        self._clusters: dict[str, str] = {}

    def __enter__(self) -> HostImage:
        self._api.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._api.__exit__(*exc)

    # --- identifiers ---

    def cluster_id(self, name: str) -> str:
        """The cluster's identifier (com.vmware.vcenter.cluster list by name)."""
        if name not in self._clusters:
            found = self._api.invoke(
                "com.vmware.vcenter.cluster",
                "list",
                {
                    "filter": opt(
                        st("com.vmware.vcenter.cluster.filter_spec", _filter(names=[name]))
                    )
                },
            )
            if not found:
                raise HostImageError(f"{self._api.where}: no cluster named {name!r}")
            self._clusters[name] = found[0]["cluster"]
        return self._clusters[name]

    def clusters(self) -> list[str]:
        """The names of vCenter's clusters."""
        found = self._api.invoke(
            "com.vmware.vcenter.cluster",
            "list",
            {"filter": opt(st("com.vmware.vcenter.cluster.filter_spec", _filter()))},
        )
        return sorted(c["name"] for c in found)

    def host_ids(self, cluster: str) -> dict[str, str]:
        """Host name -> identifier, for the cluster's hosts."""
        found = self._api.invoke(
            "com.vmware.vcenter.host",
            "list",
            {
                "filter": opt(
                    st(
                        "com.vmware.vcenter.host.filter_spec",
                        _filter(clusters=[self.cluster_id(cluster)])
                        | {
                            "hosts": opt(),
                            "standalone": opt(),
                            "connection_states": opt(),
                            "host_uuids": opt(),
                        },
                    )
                )
            },
        )
        return {h["name"]: h["host"] for h in found}

    # --- the desired state ---

    def managed(self, cluster: str) -> bool:
        """Whether vLCM manages the cluster by an image (else: baselines, esxcli per host)."""
        try:
            self._api.invoke(SW, "get", {"cluster": self.cluster_id(cluster)})
        except VapiError as exc:
            if exc.kind == "not_found":
                return False
            raise HostImageError.of(exc) from None
        return True

    def desired(self, cluster: str) -> Image:
        """The cluster's desired state, the latest commit."""
        info = self._call(SW, "get", {"cluster": self.cluster_id(cluster)})
        return _image(info)

    def stage(self, cluster: str, *, base: str | None, components: dict[str, str | None]) -> Staged:
        """Commit a new desired state: the current one with `base` and `components` changed.

        A component version None removes the component. A draft of ours left by an earlier,
        interrupted run is deleted first (vLCM allows one draft per user).
        """
        previous = self.desired(cluster)
        cid = self.cluster_id(cluster)
        draft = self._draft(cid)
        if base:
            self._call(
                f"{SW}.drafts.software.base_image",
                "set",
                {
                    "cluster": cid,
                    "draft": draft,
                    "spec": st("com.vmware.esx.settings.base_image_spec", {"version": base}),
                },
            )
        to_set = {n: opt(v) for n, v in components.items() if v is not None}
        to_delete = sorted(n for n, v in components.items() if v is None)
        self._call(
            f"{SW}.drafts.software.components",
            "update",
            {
                "cluster": cid,
                "draft": draft,
                "spec": st(
                    f"{SW}.drafts.software.components.update_spec",
                    {
                        "components_to_set": opt(vmap(to_set)),
                        "components_to_delete": opt(to_delete),
                    },
                ),
            },
        )
        commit = self._task(
            self._call(
                f"{SW}.drafts",
                "commit$task",
                {
                    "cluster": cid,
                    "draft": draft,
                    "spec": st(f"{SW}.drafts.commit_spec", {"orchestrator": opt()}),
                },
            ),
            deadline=time.monotonic() + 600,
        )
        return Staged(commit=str(commit), previous=previous, image=self.desired(cluster))

    def rollback(self, cluster: str, previous: Image) -> Staged:
        """Commit `previous` again (base image and exactly its components); apply it next."""
        now = self.desired(cluster)
        changes: dict[str, str | None] = {
            n: None for n in now.components if n not in previous.components
        }
        changes |= previous.components
        return self.stage(cluster, base=previous.base, components=changes)

    # --- the depot ---

    def base_images(self) -> list[str]:
        """The base image versions the depot holds, oldest first."""
        found = self._call(
            "com.vmware.esx.settings.depot_content.base_images", "list", {"filter": opt()}
        )
        return [b["version"] for b in found or []]

    def depot_components(self) -> dict[str, list[str]]:
        """Component name -> the versions the depot holds, oldest first."""
        found = self._call(
            "com.vmware.esx.settings.depot_content.components", "list", {"filter": opt()}
        )
        return {c["name"]: [v["version"] for v in c["versions"]] for c in found or []}

    # --- hosts ---

    def compliance(
        self, cluster: str, *, deadline: float | None = None
    ) -> dict[str, HostCompliance]:
        """Scan the cluster (a vLCM task) and read each host's compliance."""
        cid = self.cluster_id(cluster)
        end = deadline if deadline is not None else time.monotonic() + 600
        self._task(self._call(SW, "scan$task", {"cluster": cid}), deadline=end)
        report = self._call(f"{SW}.compliance", "get", {"cluster": cid})
        names = {h: i["name"] for h, i in (report.get("host_info") or {}).items()}
        out = {}
        for host, c in (report.get("hosts") or {}).items():
            running = Image(
                base=((c.get("base_image") or {}).get("current") or {}).get("version", ""),
                components={
                    n: x["current"]["version"]
                    for n, x in (c.get("components") or {}).items()
                    if x.get("current")
                },
            )
            name = names.get(host, host)
            out[name] = HostCompliance(name, str(c["status"]), str(c["impact"]), running)
        return out

    def apply(
        self,
        cluster: str,
        hosts: list[str],
        *,
        deadline: float,
        on_progress: Callable[[int], None] | None = None,
    ) -> Applied:
        """Remediate `hosts` (names) to the latest commit; wait for vLCM's task until `deadline`.

        vLCM puts a host in maintenance mode itself only where its VMs allow it; the upgrade
        puts its hosts there first (rackcert's own mark), so vLCM leaves them there after.
        """
        ids = self.host_ids(cluster)
        unknown = sorted(set(hosts) - set(ids))
        if unknown:
            raise HostImageError(f"{self._api.where}: not hosts of cluster {cluster}: {unknown}")
        names = {v: k for k, v in ids.items()}
        spec = st(
            f"{SW}.apply_spec",
            {
                "commit": opt(),
                "hosts": opt(sorted(ids[h] for h in hosts)),
                "accept_eula": opt(True),
            },
        )
        task = self._call(SW, "apply$task", {"cluster": self.cluster_id(cluster), "spec": spec})
        result = self._task(task, deadline=deadline, on_progress=on_progress)
        return Applied(
            commit=str(result["commit"]),
            remediated=sorted(names.get(h, h) for h in result.get("successful_hosts") or []),
            skipped=sorted(names.get(h, h) for h in result.get("skipped_hosts") or []),
        )

    # --- plumbing ---

    def _call(self, service: str, operation: str, fields: dict[str, Any]) -> Any:
        try:
            return self._api.invoke(service, operation, fields)
        except VapiError as exc:
            raise HostImageError.of(exc) from None

    def _draft(self, cid: str) -> str:
        try:
            return str(self._api.invoke(f"{SW}.drafts", "create", {"cluster": cid}))
        except VapiError as exc:
            if exc.kind != "already_exists":
                raise HostImageError.of(exc) from None
        user = self._api_user()
        for draft, summary in (self._call(f"{SW}.drafts", "list", {"cluster": cid}) or {}).items():
            if summary["metadata"]["owner"] == user:
                self._call(f"{SW}.drafts", "delete", {"cluster": cid, "draft": draft})
        return str(self._call(f"{SW}.drafts", "create", {"cluster": cid}))

    def _api_user(self) -> str:
        return str(self._call("com.vmware.cis.session", "get", {})["user"])

    def _task(
        self,
        task: str,
        *,
        deadline: float,
        on_progress: Callable[[int], None] | None = None,
    ) -> Any:
        """Wait for an Automation API task; its result, or HostImageError with its error."""
        pause = 0.02
        while True:
            info = self._call("com.vmware.cis.tasks", "get", {"task": task, "spec": opt()})
            status = info["status"]
            if on_progress is not None and info.get("progress"):
                on_progress(int(info["progress"]["completed"]))
            if status == "SUCCEEDED":
                return info.get("result")
            if status == "FAILED":
                error = info.get("error") or {}
                messages = error.get("messages") or [{}]
                text = messages[0].get("default_message") or "failed"
                raise HostImageError(f"{self._api.where}: {info['operation']}: {text}")
            if time.monotonic() >= deadline:
                raise HostImageError(
                    f"{self._api.where}: {info['operation']} still {status.lower()} at the"
                    f" deadline ({info.get('progress', {}).get('completed', 0)}% done); vLCM"
                    " goes on, read compliance to see where it stands"
                )
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, self._poll_s)


def _filter(**sets: list[str]) -> dict[str, Any]:
    fields: dict[str, Any] = {k: opt() for k in ("clusters", "names", "folders", "datacenters")}
    for key, values in sets.items():
        fields[key] = opt(sorted(values))
    return fields


def _image(info: dict[str, Any]) -> Image:
    components = {n: c.get("version") or "" for n, c in (info.get("components") or {}).items()}
    return Image(base=info["base_image"]["version"], components=components)
