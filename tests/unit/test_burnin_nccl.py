"""NCCL's own INFO lines, read per rank: the transport per peer and GPUDirect RDMA, judged.

The lines are in NCCL 2.2x's format (`host:pid:tid [dev] NCCL INFO ...`, `Channel 00/0 :
0[0] -> 1[0] [send] via NET/IB/0/GDRDMA`), as NVIDIA/nccl #1676 quotes them; srun's
`--label` prefix (`3: `) is read past.
"""

from __future__ import annotations

from validation.bench.burnin import nccl

IB_GDR = """\
node1:4242:4250 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
node1:4242:4250 [0] NCCL INFO Using network IB
node1:4242:4250 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA
0: node2:5151:5160 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
0: node2:5151:5160 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/IB/0/GDRDMA
node2:5151:5160 [0] NCCL INFO Channel 01 : 1[0] -> 2[1] via P2P/CUMEM/read
"""


def test_ib_with_gdr_on_every_rank_passes() -> None:
    ranks = nccl.parse(IB_GDR)
    assert [(r["rank"], r["version"], r["gdr"]) for r in ranks] == [
        ("node1:4242", "2.21.5+cuda12.4", True),
        ("node2:5151", "2.21.5+cuda12.4", True),
    ]
    assert ranks[1]["transports"] == {"0": "NET/IB", "2": "P2P"}
    assert nccl.judge(ranks, rdma=True) == []


def test_a_rank_on_sockets_fails_and_ib_without_gdr_fails_where_rdma_is_expected() -> None:
    text = IB_GDR.replace("[send] via NET/IB/0/GDRDMA\n0:", "[send] via NET/Socket/0\n0:", 1)
    assert nccl.judge(nccl.parse(text), rdma=False) == [
        "NCCL rank node1:4242: network peers over sockets (NET/Socket), not RDMA"
    ]
    no_gdr = IB_GDR.replace("/GDRDMA", "")
    assert nccl.judge(nccl.parse(no_gdr), rdma=False) == []
    assert [p.split(":")[0] for p in nccl.judge(nccl.parse(no_gdr), rdma=True)] == [
        "NCCL rank node1",
        "NCCL rank node2",
    ]
