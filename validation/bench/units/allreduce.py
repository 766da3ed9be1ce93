"""The allreduce sweep's figures on the controller: busbw against the line rate of the link
the sweep crossed (validation.bench.links). The sweep itself runs on the nodes
(validation.bench.node.allreduce_loop)."""

from __future__ import annotations

from typing import Any

from rackcert.core.results import AllreducePoint, AllreduceResult
from rackcert.core.spec import Certification
from validation.bench import links
from validation.bench.options import Engine

WORLD1_NOTE = (
    "world size 1: the sweep proves the engine path and the reduced values; an in-place"
    " single-rank allreduce moves no data (NCCL returns after a launch), so times are"
    " latency, algbw is not a bandwidth and busbw is 0 by definition"
)


def allreduce_result(
    raw: dict[str, Any],
    engine: Engine,
    cert: Certification,
    nic_gbps: float | None,
    option_gbps: float | None = None,
) -> AllreduceResult:
    """The sweep's figures with the link they crossed and what that link should carry
    (validation.bench.links): busbw judged against the line rate of THAT link."""
    points = raw["allreduce"]["points"]
    world = raw["world_size"]
    link = links.launch_link(raw)
    want = links.expectation(link, cert, nic_gbps, option_gbps) if world > 1 else None
    rate = want.line_rate_gbps if want else None
    top = sorted(points, key=lambda p: p["size_bytes"])[-3:]
    return AllreduceResult(
        backend=engine.name if engine.name == "horovod" else raw["backend"],
        device=raw["device"],
        world_size=world,
        points=[AllreducePoint(**p) for p in points],
        line_rate_gbps=rate,
        busbw_fraction=busbw_fraction(points, rate) if world > 1 else None,
        note=WORLD1_NOTE if world == 1 else None,
        link=link.topology,
        link_detail=link.detail or None,
        link_source=want.source if want else None,
        expected_busbw_gbps=want.busbw_gbps if want else None,
        busbw_largest_gbps=sum(p["busbw_gbps"] for p in top) / len(top) if top else None,
        sys_crossing=link.sys_pairs,
    )


def sys_note(pairs: list[str]) -> str:
    """What a figure carries when its GPUs talk across the sockets (SYS)."""
    return f" (through SYS, across sockets: {', '.join(pairs)})" if pairs else ""


def busbw_fraction(
    points: list[dict[str, Any]], line_rate_gbps: float | None, largest: int = 3
) -> float | None:
    """Mean busbw of the `largest` biggest sizes as a fraction of the line rate (Gb/s).

    busbw is in GB/s (bytes), the line rate in Gb/s (bits): x 8.
    """
    if not line_rate_gbps or not points:
        return None
    top = sorted(points, key=lambda p: p["size_bytes"])[-largest:]
    mean = sum(p["busbw_gbps"] for p in top) / len(top)
    return mean * 8.0 / line_rate_gbps
