"""A node's Certificate from what validate recorded (validate.json's data), so the roll
judges a node with the same evidence `rackcert validate` writes.

Versions come from the checks' observations (ValidateNode.versions), check statuses per
node from the results. Figures (the per-node localisation stage's compute and link rates
against their rules) are added by the certifier that runs that stage.
"""

from __future__ import annotations

from rackcert.core.stage_records import ValidateData
from rackcert.upgrade.ports import Certificate


def certificates(data: ValidateData, nodes: list[str] | None = None) -> dict[str, Certificate]:
    """node -> Certificate for every node validate recorded (or those named)."""
    out: dict[str, Certificate] = {}
    for name, node in data.nodes.items():
        if nodes is not None and name not in nodes:
            continue
        out[name] = Certificate(versions=dict(node.versions))
    for result in data.results:
        cert = out.get(result.node)
        if cert is not None:
            cert.checks[result.id] = str(result.status.value)
    return out
