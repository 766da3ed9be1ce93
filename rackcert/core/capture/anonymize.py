"""`capture --anonymize`: the same capture with site names and addresses replaced.

For a public bug report. Every host, VM (templates and vCLS agents included),
cluster, datacenter, datastore and port group gets an alias (`host-01`, `vm-001`,
`cluster-1`, ...), and every IPv4 address one in 192.0.2.0/24 (TEST-NET-1, RFC 5737);
the same original maps to the same alias everywhere in the file, including inside
other strings (a VM name in an extraConfig value). Hardware identity stays (models,
PCI ids, UUIDs): a bug in device handling needs it, and it opens nothing.
"""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Any

from rackcert.core.capture.model import Capture

_IPV4 = re.compile(r"(?<![\d.])(\d{1,3}(?:\.\d{1,3}){3})(?![\d.])")


def aliases(capture: Capture) -> dict[str, str]:
    """Original name -> alias, for every name the capture holds."""
    out: dict[str, str] = {}

    def add(names: list[str], prefix: str, width: int) -> None:
        for i, name in enumerate(sorted(set(names)), 1):
            if name and name not in out:
                out[name] = f"{prefix}-{i:0{width}d}"

    add([h.name for h in capture.hosts], "host", 2)
    add([v.name for v in capture.vms if v.template], "template", 2)
    add([v.name for v in capture.vms if not v.template], "vm", 3)
    add([c.name for c in capture.clusters], "cluster", 1)
    add([capture.datacenter], "datacenter", 1)
    add([d.name for d in capture.datastores], "datastore", 2)
    add([n.name for n in capture.networks], "network", 2)
    return out


def anonymize(capture: Capture) -> Capture:
    """A copy of the capture with every name and IPv4 address replaced consistently."""
    names = aliases(capture)
    # Longest first, and whole names only: "esx1" must not eat into "esx10".
    ordered = sorted(names, key=len, reverse=True)
    pattern = re.compile(
        r"(?<![A-Za-z0-9_-])(" + "|".join(re.escape(n) for n in ordered) + r")(?![A-Za-z0-9_-])"
    )
    addresses: dict[str, str] = {}

    def address(match: re.Match[str]) -> str:
        text = match.group(1)
        try:
            ipaddress.IPv4Address(text)
        except ValueError:
            return text
        if text not in addresses:
            addresses[text] = f"192.0.2.{len(addresses) % 254 + 1}"
        return addresses[text]

    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            if names:
                value = pattern.sub(lambda m: names[m.group(1)], value)
            return _IPV4.sub(address, value)
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [scrub(v) for v in value]
        return value

    data = scrub(json.loads(capture.model_dump_json()))
    data["anonymized"] = True
    for vm in data["vms"]:  # rackcert's are uuid5 of the real names: a guess could confirm them
        vm["instance_uuid"] = ""
    out = Capture.model_validate(data)
    return _sorted(out)


def _sorted(capture: Capture) -> Capture:
    """Aliases sort differently from the originals: keep the file's order rule."""
    capture.hosts.sort(key=lambda h: h.name)
    capture.vms.sort(key=lambda v: v.name)
    capture.clusters.sort(key=lambda c: c.name)
    capture.datastores.sort(key=lambda d: d.name)
    capture.networks.sort(key=lambda n: n.name)
    for cluster in capture.clusters:
        cluster.hosts.sort()
    for host in capture.hosts:
        host.datastores.sort()
        host.networks.sort()
    return capture
