"""The lab's slurm.conf: the default partition over some nodes, another partition beside it.

Why: the tests' one Slurm rack (tests/support/plugins/slurm.py) joins four nodes once and
serves two views of them: the 2-node tests' jobs (`-N2`, a roll's drains) must get node1
and node2, never node3 or node4, and localisation's steps need all four.
"""

from __future__ import annotations

from rackcert.lab.slurm import NodeDef, SlurmLab


def _lab(**kw: object) -> SlurmLab:
    nodes = [NodeDef(f"node{i}", f"10.0.0.{i + 1}") for i in range(1, 5)]
    return SlurmLab.for_owner("t", address="10.0.0.1", nodes=nodes, **kw)  # type: ignore[arg-type]


def _partitions(conf: str) -> list[str]:
    return [line for line in conf.splitlines() if line.startswith("PartitionName=")]


def test_one_default_partition_over_every_node_unless_told() -> None:
    assert _partitions(_lab().slurm_conf()) == [
        "PartitionName=lab Nodes=node1,node2,node3,node4 Default=YES MaxTime=INFINITE State=UP"
    ]


def test_the_default_partition_over_two_and_another_over_four() -> None:
    lab = _lab(partition_nodes=["node1", "node2"], partitions={"lab4": ["node1", "node3"]})
    assert _partitions(lab.slurm_conf()) == [
        "PartitionName=lab Nodes=node1,node2 Default=YES MaxTime=INFINITE State=UP",
        "PartitionName=lab4 Nodes=node1,node3 MaxTime=INFINITE State=UP",
    ]
    # every node is still a node of the controller (slurmd starts on each)
    assert sum(line.startswith("NodeName=") for line in lab.slurm_conf().splitlines()) == 4
    again = SlurmLab(**{**lab.to_dict(), "nodes": lab.nodes, "directory": lab.directory})
    assert again.slurm_conf() == lab.slurm_conf()
