"""A node's Certificate from what validate recorded (validate.json's data), so the roll
judges a node with the same evidence `rackcert validate` writes.

Versions come from the checks' observations (ValidateNode.versions), check statuses per
node from the results. Figures come from localisation's per-node stage (bench.json's
`localise.nodes` rows, or the stage run on the node alone by the certifier): each unit's
compute and copy rates and the node's own allreduce, named `<unit>.<metric>` so that a
node is compared with itself and the rack's median figure by figure.
"""

from __future__ import annotations

from typing import Any

from rackcert.core.localisation import NAME_CAP
from rackcert.core.stage_records import NodeRow, ValidateData
from rackcert.core.untrusted import cap, strip_controls
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


# The per-node stage's figures judged by localisation's rules (validation.bench.localisation
# .findings: UNIT_METRICS and node_allreduce), the ones a roll compares.
UNIT_FIGURES = ("gemm_gflops", "memcpy_gb_s", "h2d_gb_s", "d2h_gb_s")


def node_figures(row: NodeRow | dict[str, Any]) -> dict[str, float]:
    """`<unit>.<metric>` -> value for one node's per-node stage row; empty when it failed."""
    row = row if isinstance(row, NodeRow) else NodeRow.model_validate(row)
    if row.error:
        return {}
    out: dict[str, float] = {}
    for unit in row.units:
        # The unit's name comes from the node (untrusted): controls stripped, length capped,
        # as rackcert.core.localisation shows it, before it names a figure in the record.
        name = cap(strip_controls(str(unit.get("unit") or "")), NAME_CAP)
        for metric in UNIT_FIGURES:
            value = unit.get(metric)
            if name and isinstance(value, int | float) and not isinstance(value, bool):
                out[f"{name}.{metric}"] = float(value)
    busbw = (row.allreduce or {}).get("busbw_gb_s")
    if isinstance(busbw, int | float) and not isinstance(busbw, bool):
        out["node_allreduce.busbw_gb_s"] = float(busbw)
    return out


def machine(row: dict[str, Any]) -> str | None:
    """The boot_id every unit of a per-node stage row reported (the probe's CPU units'
    `machine`), else None: a failed row, a GPU unit (none recorded), units that disagree."""
    if row.get("error"):
        return None
    seen = {u.get("machine") for u in row.get("units") or []}
    return seen.pop() if len(seen) == 1 and None not in seen else None


def reference_figures(row: dict[str, Any], reference: dict[str, Any]) -> dict[str, float]:
    """The reference's figures (the same probe on the controller, at the same barrier:
    validation.bench.localisation.reference) that the node's row also has, only where both
    reported one boot_id (the node's CPUs are the controller's machine's, the lab's case);
    empty elsewhere: a rack's node never shares the controller's kernel."""
    mine = machine(row)
    if mine is None or mine != machine(reference):
        return {}
    own, ref = node_figures(row), node_figures(reference)
    return {name: value for name, value in ref.items() if name in own and value > 0}
