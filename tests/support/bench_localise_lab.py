"""What more than one test module needs from the old test_bench_localise_lab.py:
tests/integration/test_bench_localise_lab.py, tests/integration/test_bench_localise_srun.py.
"""

from __future__ import annotations

from rackcert.core.ssh_target import SshTarget
from rackcert.lab.sshhosts.host import TestHost
from validation.bench.transport import Node

LINE_MBIT = 100


def nodes_of(hosts: list[TestHost]) -> list[Node]:
    return [
        Node(
            h.name,
            SshTarget(
                host=h.address,
                port=h.port,
                identity_file=str(h.key_file),
                known_hosts=str(h.known_hosts),
            ),
        )
        for h in hosts
    ]


def named(rec: dict) -> list[str]:
    return [f["id"] for f in rec["findings"]]


def why(rec: dict) -> list[str]:
    """What an assertion on the findings shows: each finding's message, then every row
    whose tool gave no figure, with the tool's own error (a link "at 0 Gb/s" is often an
    iperf3 that could not connect, not a slow link; the error says which), and each CPU
    unit's GEMM with the share of a core its probe got."""
    out = [f["message"] for f in rec["findings"]]
    for p in rec.get("links") or []:
        for key in ("first_error", "error"):
            if p.get(key):
                out.append(f"link {p['a']}<->{p['b']} (round {p['round']}) {key}: {p[key]}")
        if (p.get("allreduce") or {}).get("error"):
            out.append(f"allreduce {p['a']}<->{p['b']}: {p['allreduce']['error']}")
    for n in rec.get("nodes") or []:
        if n.get("error"):
            out.append(f"node {n['node']}: {n['error']}")
        # a CPU figure (best of two after a confirmation) and the share of a core the
        # first probe got: starved by the machine's other work, or a slow node
        out += [
            f"node {n['node']} {u['unit']}: GEMM {u['gemm_gflops']:.3g} GFLOP/s; first probe"
            f" {u.get('first', u)['gemm_gflops']:.3g} at {u['cpu_share']:.2f} of a core,"
            f" {u.get('cpu_waited') or 0:.2f} of the time queued behind others"
            for u in n.get("units") or []
            if u.get("cpu_share") is not None and u.get("gemm_gflops") is not None
        ]
    return out
