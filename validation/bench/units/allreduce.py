"""The allreduce sweep's figures on the controller: busbw against the line rate of the link
the sweep crossed (validation.bench.links). The sweep itself runs on the nodes
(validation.bench.node.allreduce_loop)."""

from __future__ import annotations

from typing import Any

from rackcert.core.results import AllreducePoint, AllreduceResult, VerdictCheck
from rackcert.core.spec import Certification
from validation.bench import links
from validation.bench.node.allreduce_loop import fixed_time_us
from validation.bench.node.declare import Opt
from validation.bench.options import BenchOptions, Engine, Point
from validation.bench.units.base import BenchUnit, Context, check

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
        fixed_time_us=fixed_time_us(points) if world > 1 else None,
        busbw_fraction_less_fixed=busbw_fraction_less_fixed(points, rate) if world > 1 else None,
        rank_wait=raw["allreduce"].get("rank_wait"),
    )


def busbw_fraction_less_fixed(
    points: list[dict[str, Any]], line_rate_gbps: float | None, largest: int = 3
) -> float | None:
    """busbw_fraction with each call's fixed time (fixed_time_us) taken out of the largest
    sizes' times: busbw x t / (t - fixed) per size, then as busbw_fraction. What the link
    carried while the bytes moved; None without a line rate, a small size, or where the
    fixed time is not below a size's time."""
    fixed = fixed_time_us(points)
    if not line_rate_gbps or fixed is None:
        return None
    top = sorted(points, key=lambda p: p["size_bytes"])[-largest:]
    if any(p["time_us"] <= fixed for p in top):
        return None
    less = [p["busbw_gbps"] * p["time_us"] / (p["time_us"] - fixed) for p in top]
    return sum(less) / len(less) * 8.0 / line_rate_gbps


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


class AllreduceUnit(BenchUnit):
    """The allreduce sweep in the largest launch: busbw against the link it crossed."""

    name = "allreduce"
    help = "allreduce sweep (nccl-tests' busbw) in the largest launch"
    options = (
        Opt("max_bytes", "int", "Largest allreduce", minimum=8, worker=True),
        Opt("line_rate_gbps", "float", "Link line rate to judge busbw against"),
    )
    # NCCL's own word on the transport it chose (validation.bench.burnin.nccl reads it): INIT
    # and NET only, so a rank's log is a few dozen lines, not one per collective.
    gpu_launch_env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}

    def tasks(
        self, opts: BenchOptions, engine: Engine, point: Point, points: list[Point]
    ) -> list[str]:
        return ["allreduce"] if point == points[-1] else []

    def run(self, ctx: Context) -> AllreduceResult | None:
        raw = next((r for _p, r in reversed(ctx.answers) if "allreduce" in r), None)
        if raw is None:
            return None
        opts = ctx.opts
        return allreduce_result(
            raw, ctx.engine, ctx.spec.certification, ctx.line_rate_gbps, opts.line_rate_gbps
        )

    def also(self, ctx: Context, result: AllreduceResult) -> dict[str, Any]:
        out: dict[str, Any] = {"judge_link": result.link_source is not None}
        if result.backend == "nccl":
            out["nccl_transport"] = nccl_transport(ctx)
        return out

    def say(self, ctx: Context, result: AllreduceResult) -> list[str]:
        best = max(p.busbw_gbps for p in result.points)
        return [
            f"  allreduce: {len(result.points)} sizes, best busbw {best:.3g} GB/s"
            f" over {result.link or 'no link'}{sys_note(result.sys_crossing)}"
        ]

    def checks(self, data: dict[str, Any], cert: Certification) -> list[VerdictCheck]:
        ar = AllreduceResult.model_validate(data["allreduce"]) if data.get("allreduce") else None
        judge_link = bool(data.get("judge_link", data.get("mode") != "local"))
        checks = [allreduce_correct(ar), allreduce_busbw(ar, cert, judge_link)]
        # Only NCCL has transports to fall back between: on CPU ranks (Gloo, Horovod's Gloo
        # operations) TCP is the one transport, so the check does not apply and is left out
        # rather than passed or listed as not judged.
        if ar is None or ar.backend == "nccl":
            checks.append(allreduce_nccl_transport(ar, data.get("nccl_transport")))
        return checks

    def lines(self, data: dict[str, Any]) -> list[str]:
        ar = data.get("allreduce")
        if not ar:
            return []
        top = sorted(ar["points"], key=lambda p: p["size_bytes"])[-3:]
        rows = ", ".join(f"{p['size_bytes']} B: {p['busbw_gbps']:.3g} GB/s" for p in top)
        over = f" over {ar['link']}" if ar.get("link") else ""
        sys_ = ar.get("sys_crossing") or []
        across = f" (through SYS, across sockets: {', '.join(sys_)})" if sys_ else ""
        wait = f"; ranks waited: {ar['rank_wait']}" if ar.get("rank_wait") else ""
        return [f"allreduce {ar['backend']} x{ar['world_size']}{over}: busbw {rows}{across}{wait}"]


def nccl_transport(ctx: Context) -> dict[str, Any]:
    """The last allreduce launch's log (NCCL_DEBUG=INFO on every rank) read per rank."""
    from validation.bench.burnin import nccl

    logs = sorted(ctx.run.artifacts("bench").glob("launch-*allreduce*.log"), key=_mtime)
    text = logs[-1].read_text(errors="replace") if logs else ""
    rdma = nccl.spec_has_rdma(ctx.spec)
    ranks = nccl.parse(text)
    return {"rdma_expected": rdma, "ranks": ranks, "problems": nccl.judge(ranks, rdma=rdma)}


def _mtime(path: Any) -> float:
    return float(path.stat().st_mtime)


def allreduce_nccl_transport(
    ar: AllreduceResult | None, seen: dict[str, Any] | None
) -> VerdictCheck:
    """Every NCCL rank on the spec's transport: none on sockets (NET/Socket), and GPUDirect
    RDMA (GDRDMA) where the spec has RDMA (NVIDIA/nccl #1676: a silent fallback)."""
    expected = "no rank on NET/Socket; GDRDMA where the spec has RDMA"
    if ar is None or not ar.points:
        return check("allreduce.nccl_transport", None, "", expected, "allreduce not run")
    if not seen or not seen.get("ranks"):
        return check(
            "allreduce.nccl_transport", None, "", expected, "NCCL wrote no transport lines"
        )
    if seen.get("problems"):
        return check("allreduce.nccl_transport", False, "; ".join(seen["problems"])[:500], expected)
    kinds = sorted({k for r in seen["ranks"] for k in r["transports"].values()})
    gdr = sum(1 for r in seen["ranks"] if r.get("gdr"))
    observed = f"{len(seen['ranks'])} rank(s) over {', '.join(kinds) or 'no peer'}; GDR on {gdr}"
    return check("allreduce.nccl_transport", True, observed, expected)


def allreduce_correct(ar: AllreduceResult | None) -> VerdictCheck:
    """Every size's reduced values equal the expected sums."""
    if ar is None or not ar.points:
        return check("allreduce.correct", None, "", "all sizes correct", "allreduce not run")
    wrong = [p.size_bytes for p in ar.points if not p.correct]
    observed = "all correct" if not wrong else f"wrong sums at sizes {wrong[:5]}"
    return check("allreduce.correct", not wrong, observed, "all sizes correct")


def allreduce_busbw(
    ar: AllreduceResult | None, cert: Certification, judge_link: bool
) -> VerdictCheck:
    """busbw at the largest sizes against the link the launch crossed (ar.link): the spec's
    expected busbw for that link when it states one, else the fraction of its line rate.
    A launch whose GPUs talk through SYS says so in what was observed."""
    expected = f">= {cert.allreduce_busbw_fraction_min:g} of line rate"
    if ar is None or not ar.points:
        return check("allreduce.busbw_fraction", None, "", expected, "allreduce not run")
    if ar.world_size < 2:
        return check(
            "allreduce.busbw_fraction",
            None,
            "world size 1",
            expected,
            "one rank moves no bytes over a link (busbw = 0 by nccl-tests' definition)",
        )
    where = f" over {ar.link} ({ar.link_detail})" if ar.link and ar.link_detail else ""
    if ar.sys_crossing:
        where += f"; through SYS, across sockets: {', '.join(ar.sys_crossing)}"
    if ar.expected_busbw_gbps is not None and ar.busbw_largest_gbps is not None:
        return check(
            "allreduce.busbw_fraction",
            ar.busbw_largest_gbps >= ar.expected_busbw_gbps,
            f"{ar.busbw_largest_gbps:.3g} GB/s busbw{where}",
            f">= {ar.expected_busbw_gbps:g} GB/s ({ar.link_source})",
        )
    if ar.busbw_fraction is None:
        why = "no line rate in the spec"
        if ar.link is not None:
            why = _no_figure(ar.link)
        return check("allreduce.busbw_fraction", None, where.lstrip("; "), expected, why)
    observed = f"{ar.busbw_fraction:.3g} of {ar.line_rate_gbps:g} Gb/s{where}"
    if ar.link_source:
        expected += f" ({ar.link_source})"
    if not judge_link:
        return check(
            "allreduce.busbw_fraction",
            None,
            observed,
            expected,
            "local run: the ranks talk inside this machine (GPU interconnect or loopback),"
            " not over the spec's network link (give --line-rate-gbps to judge it)",
        )
    return check(
        "allreduce.busbw_fraction",
        ar.busbw_fraction >= cert.allreduce_busbw_fraction_min,
        observed,
        expected,
    )


def _no_figure(link: str) -> str:
    if link == "loopback":
        return "the ranks talk over this machine's loopback (CPU ranks): no link to judge"
    if link == "sys":
        return (
            "the GPUs talk through SYS (across sockets): no shipped figure for that path;"
            " state one in certification.links (topology: sys) with its source"
        )
    return (
        f"no figure for a {link} link with these GPUs: state one in certification.links"
        " with its source (or give --line-rate-gbps)"
    )
