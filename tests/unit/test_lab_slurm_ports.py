"""The lab's slurm.conf carries SrunPortRange only when told.

Why: where a node's firewalld sits between srun and the steps' slurmstepd
(tests/integration/test_firewalld_hosts.py), srun must listen in the range the slurm_node role
opened (slurm.conf(5), SrunPortRange); the lab's other Slurm, with no firewall, keeps the
ports the kernel picks, as before.
"""

from __future__ import annotations

from rackcert.lab.slurm import NodeDef, SlurmLab


def _lab(**kw: object) -> SlurmLab:
    nodes = [NodeDef("node1", "10.0.0.2")]
    return SlurmLab.for_owner("t", address="10.0.0.1", nodes=nodes, **kw)  # type: ignore[arg-type]


def _ranges(lab: SlurmLab) -> list[str]:
    return [line for line in lab.slurm_conf().splitlines() if line.startswith("SrunPortRange")]


def test_no_srun_port_range_unless_told() -> None:
    assert _ranges(_lab()) == []


def test_the_srun_port_range_told_and_kept_by_the_labs_record() -> None:
    lab = _lab(srun_port_range="60001-63000")
    assert _ranges(lab) == ["SrunPortRange=60001-63000"]
    again = SlurmLab(**{**lab.to_dict(), "nodes": lab.nodes, "directory": lab.directory})
    assert _ranges(again) == ["SrunPortRange=60001-63000"]
