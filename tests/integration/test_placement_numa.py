"""Item 5: GPUDirect RDMA and NUMA. In the reference rack s1-pair, s3-pair-a and s3-pair-b get
their NVLink pair on NUMA node 1 and the only ConnectX-6 port, on node 0, with allowP2P set:
GPUDirect RDMA then crosses the socket link, which NCCL's defaults do not use. The plan says so
per VM; placement puts a VM with a passthrough NIC port on the port's node before a VM without
one; `gpu_nic_numa: required` refuses a placement that crosses nodes.
"""

from __future__ import annotations

import json

from tests.support.placement_numa import CROSSING


def test_plan_json_and_table_carry_the_warnings(rack_twin, capsys):
    from tests.support.vsphere_helpers import cli

    lab = rack_twin()
    code, out, err = cli(lab, capsys, "plan", str(lab.spec_path), "--json")
    assert code == 0, err
    warnings = json.loads(out)["warnings"]
    assert {w.split(":")[0].removeprefix("VM ") for w in warnings} == CROSSING
    code, out, err = cli(lab, capsys, "plan", str(lab.spec_path))
    assert code == 0, err
    assert "warning: VM s1-pair: GPU(s) 0000:b1:00.0, 0000:ca:00.0 on NUMA node 1" in " ".join(
        out.split()
    )
