"""The judge of the twin's vLCM: Broadcom's vSphere Automation SDK for Python (`vmware-vcenter`).

Runs inside the judges' virtual environment (.ci/setup.d/25-vsphere-judges.sh), never in
rackcert's: `<judges>/bin/python tests/support/vlcm_sdk_judge.py REQUEST.json` prints one JSON
answer.
The client is made as the SDK's documentation and samples make it: a requests Session whose
`verify` is the vCenter's CA file, then `create_vsphere_client(server=..., username=...,
password=..., session=...)`, and the vLCM stubs (com.vmware.esx.settings.*_client) built on that
client's stub configuration. Cluster and host identifiers come from `vcenter.Cluster.list` and
`vcenter.Host.list` by name; tasks are waited on through the SDK's Task helper (`get_info`,
`get_result`).

REQUEST: {"server": "127.0.0.1:PORT", "user": ..., "password_file": ..., "ca_file": ...,
"cluster": NAME, "steps": [{"op": "image"} | {"op": "scan"} | {"op": "stage", "base": V,
"components": {NAME: V}} | {"op": "apply", "hosts": [NAME, ...]} | {"op": "commit", "id": ID}
| {"op": "depot"}]}
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import requests
from com.vmware.esx.settings.clusters.software.drafts.software_client import (
    BaseImage,
    Components,
)
from com.vmware.esx.settings.clusters.software_client import Commits, Compliance, Drafts
from com.vmware.esx.settings.clusters_client import Software
from com.vmware.esx.settings.depot_content_client import BaseImages
from com.vmware.esx.settings.depot_content_client import Components as DepotComponents
from com.vmware.esx.settings_client import BaseImageSpec
from com.vmware.vcenter_client import Cluster, Host
from vmware.vapi.vsphere.client import create_vsphere_client


def wait(task: Any, timeout: float = 120) -> Any:
    """The task's result once SUCCEEDED; its error raised once FAILED."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = task.get_info()
        if info.status == "SUCCEEDED":
            return task.get_result()
        if info.status == "FAILED":
            raise RuntimeError(f"task failed: {info.error}")
        time.sleep(0.05)
    raise TimeoutError(f"task {task.get_task_id()} still running")


def main(request: dict[str, Any]) -> list[dict[str, Any]]:
    session = requests.Session()
    session.verify = request["ca_file"]
    password = Path(request["password_file"]).read_text().strip()
    client = create_vsphere_client(
        server=request["server"], username=request["user"], password=password, session=session
    )
    config = client._stub_config
    (cluster,) = [
        c.cluster
        for c in client.vcenter.Cluster.list(Cluster.FilterSpec(names={request["cluster"]}))
    ]
    names = {h.host: h.name for h in client.vcenter.Host.list(Host.FilterSpec(clusters={cluster}))}
    ids = {name: host for host, name in names.items()}
    out: list[dict[str, Any]] = []
    for step in request["steps"]:
        op = step["op"]
        if op == "image":
            sw = Software(config).get(cluster)
            out.append(
                {
                    "base": sw.base_image.version,
                    "display_version": sw.base_image.details.display_version,
                    "components": {n: c.version for n, c in sw.components.items()},
                }
            )
        elif op == "scan":
            wait(Software(config).scan_task(cluster))
            comp = Compliance(config).get(cluster)
            out.append(
                {
                    "status": str(comp.status),
                    "commit": comp.commit,
                    "non_compliant": sorted(names[h] for h in comp.non_compliant_hosts),
                    "compliant": sorted(names[h] for h in comp.compliant_hosts),
                    "hosts": {
                        names[h]: {
                            "status": str(c.status),
                            "impact": str(c.impact),
                            "base_current": c.base_image.current.version,
                            "base_target": c.base_image.target.version,
                            "components": {
                                n: [
                                    x.current.version if x.current else None,
                                    x.target.version if x.target else None,
                                ]
                                for n, x in c.components.items()
                            },
                        }
                        for h, c in comp.hosts.items()
                    },
                }
            )
        elif op == "stage":
            draft = Drafts(config).create(cluster)
            if step.get("base"):
                BaseImage(config).set(cluster, draft, BaseImageSpec(version=step["base"]))
            Components(config).update(
                cluster, draft, Components.UpdateSpec(components_to_set=step.get("components", {}))
            )
            commit = wait(Drafts(config).commit_task(cluster, draft, Drafts.CommitSpec()))
            info = Commits(config).get(cluster, commit)
            out.append(
                {"commit": commit, "author": info.author, "apply_status": str(info.apply_status)}
            )
        elif op == "apply":
            spec = Software.ApplySpec(hosts={ids[n] for n in step["hosts"]}, accept_eula=True)
            try:
                result = wait(Software(config).apply_task(cluster, spec), step.get("timeout", 120))
            except RuntimeError as exc:
                out.append({"status": "FAILED", "error": str(exc)})
                continue
            out.append(
                {
                    "status": "SUCCEEDED",
                    "commit": result.commit,
                    "successful": sorted(names[h] for h in result.successful_hosts),
                    "skipped": sorted(names[h] for h in result.skipped_hosts),
                    "failed": sorted(names[h] for h in result.failed_hosts),
                }
            )
        elif op == "depot":
            out.append(
                {
                    "base_images": [b.version for b in BaseImages(config).list()],
                    "components": {
                        c.name: [v.version for v in c.versions]
                        for c in DepotComponents(config).list()
                    },
                }
            )
        elif op == "commit":
            info = Commits(config).get(cluster, step["id"])
            out.append({"author": info.author, "apply_status": str(info.apply_status)})
        else:
            raise SystemExit(f"unknown op {op!r}")
    client.session_svc.delete()
    return out


if __name__ == "__main__":
    print(json.dumps(main(json.loads(Path(sys.argv[1]).read_text()))))
