"""The `rackcert_upgrade_*` families: a roll's state per node and its nodes out of service.

For the alert rules: a node `failed` for long, more nodes out than the roll's budget, a
roll `stopped`. Built from upgrade.json's record (rackcert.core.stage_records), so the
metrics say what the record says and nothing it does not.

    families = upgrade_families(record, spec="lab")
"""

from __future__ import annotations

from rackcert.core.stage_records import UpgradeRecord
from rackcert.core.upgrade_layers import node_states, out_of_service_states
from rackcert.metrics.families import Family


def upgrade_families(record: UpgradeRecord, spec: str) -> list[Family]:
    data = record.data
    state = Family(
        "upgrade_node_state",
        "1 for the state each node of the roll is in (upgrade.json), 0 for the others",
        ("spec", "node", "host", "state"),
    )
    out = Family(
        "upgrade_nodes_out_of_service",
        "Nodes the roll holds out of service now (drained by it, down, upgrading, failed),"
        " per partition",
        ("spec", "partition"),
    )
    most = Family(
        "upgrade_nodes_out_of_service_max",
        "The most nodes seen out of service at once during the roll, per partition",
        ("spec", "partition"),
    )
    budget = Family("upgrade_info", "The roll's settings and status as labels", (
        "spec", "status", "max_unavailable", "certified_run"))  # fmt: skip
    failures = Family("upgrade_failures", "Nodes the roll failed so far", ("spec",))
    counts: dict[str, int] = {}
    # The states come from the layers' declarations (a layer registered from outside too);
    # OUT: those in which the roll holds a node out of service (drained by it, down, upgrading).
    out_states = out_of_service_states()
    states = ("pending", *out_states, *(s for s in node_states()[1:] if s not in out_states))
    for node in data.nodes:
        for name in states:
            state.set(1.0 if node.state == name else 0.0, spec=spec, node=node.name,
                      host=node.host, state=name)  # fmt: skip
        for part in node.partitions or ["-"]:
            counts.setdefault(part, 0)
            if node.state in out_states:
                counts[part] += 1
    for part, n in counts.items():
        out.set(n, spec=spec, partition=part)
    for part, n in data.out_of_service_max.items():
        most.set(n, spec=spec, partition=part)
    budget.set(1, spec=spec, status=data.status, max_unavailable=data.max_unavailable,
               certified_run=data.certified_run)  # fmt: skip
    failures.set(data.failures, spec=spec)
    return [state, out, most, budget, failures]
