"""RDMA: ib_write_bw between node pairs (perftest) where every node has an RDMA device."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from rackcert.core.runs import RunDir
from rackcert.core.spec import Spec
from rackcert.core.stage_records import Model
from validation.bench import launch, perftest
from validation.bench.options import BenchOptions, Point
from validation.bench.targets import engine_gpus, nodes_of
from validation.bench.transport import Step
from validation.bench.units.base import BenchUnit, Context

# -- its part of bench.json (registered with the spine's BenchData: BenchUnit.parts) ----


class RdmaPoint(Model):
    size_bytes: int
    iterations: int
    peak_gbps: float
    avg_gbps: float
    msg_rate_mpps: float


class RdmaPair(Model):
    """ib_write_bw from client to server (validation.bench.perftest), or its error."""

    client: str
    server: str
    error: str | None = None
    use_cuda: bool | None = None
    points: list[RdmaPoint] = Field(default_factory=list)
    device: str | None = None
    link_type: str | None = None
    mtu: str | None = None
    gbits: bool | None = None
    best_avg_gbps: float | None = None


class RdmaProbe(Model):
    """What a node answered to perftest.PROBE: its RDMA devices, the tool, CUDA support."""

    devices: list[str] = Field(default_factory=list)
    tool: bool = False
    cuda: bool = False


class RdmaResult(Model):
    """ib_write_bw between node pairs (validation.bench.units.rdma), or why it was skipped."""

    skipped: bool | None = None
    reason: str | None = None
    engine: str | None = None
    pairs: list[RdmaPair] | None = None
    nodes: dict[str, RdmaProbe] | None = Field(None, description="Each node's probe answer")


def run_rdma(spec: Spec, opts: BenchOptions, run: RunDir, points: list[Point]) -> dict[str, Any]:
    """ib_write_bw between node pairs where every node has an RDMA device, else the reason."""
    if opts.local:
        return {"skipped": True, "reason": "one machine: RDMA is measured between node pairs"}
    vms = points[-1].vms
    if len(vms) < 2:
        return {"skipped": True, "reason": "one node: RDMA is measured between node pairs"}
    nodes = nodes_of(spec, vms, opts)
    log = run.artifacts("bench") / "rdma-probe.log"
    step = Step.on_all(nodes, perftest.PROBE, "rackcert-rdma-probe")
    probe = launch.on_nodes("rdma probe", [step], tty=False)
    try:
        answers = launch.execute_text(probe, log, timeout_s=60)
    except launch.LaunchError as exc:
        return {"skipped": True, "reason": f"could not ask the nodes: {exc}"}
    found = {n.name: perftest.parse_probe(text) for n, text in zip(nodes, answers, strict=True)}
    for n in nodes:
        why = perftest.skip_reason(n.name, found[n.name])
        if why:
            return {"skipped": True, "reason": why, "nodes": found}
    by_name = {n.name: n for n in nodes}
    results: list[dict[str, Any]] = []
    for a, b in perftest.pairs([n.name for n in nodes]):
        server, client = by_name[b], by_name[a]
        cuda = found[a]["cuda"] and found[b]["cuda"] and engine_gpus(spec, vms)
        dev_s, dev_c = found[b]["devices"][0], found[a]["devices"][0]
        pair = Step.pair(
            server,
            client,
            perftest.server_command(dev_s, cuda),
            perftest.client_command(server.address, dev_c, cuda),
            name="rackcert-ib-write-bw",
        )
        job = launch.on_nodes(f"ib_write_bw {a} -> {b}", [pair], tty=False)
        try:
            texts = launch.execute_text(job, run.artifacts("bench") / f"rdma-{a}-{b}.log")
            parsed = perftest.parse(texts[1])
        except (launch.LaunchError, perftest.PerftestParseError) as exc:
            results.append({"client": a, "server": b, "error": str(exc)})
            continue
        results.append({"client": a, "server": b, "use_cuda": bool(cuda), **parsed})
    return {"engine": perftest.BINARY, "pairs": results}


class RdmaUnit(BenchUnit):
    """ib_write_bw between node pairs (perftest) where every node has an RDMA device."""

    name = "rdma"
    parts: ClassVar[dict[str, Any]] = {"rdma": RdmaResult}
    after_launches = True
    help = "ib_write_bw between node pairs"

    def run(self, ctx: Context) -> RdmaResult:
        return RdmaResult.model_validate(run_rdma(ctx.spec, ctx.opts, ctx.run, ctx.points))

    def lines(self, data: dict[str, Any]) -> list[str]:
        rdma = data.get("rdma") or {}
        out = [f"rdma: not run ({rdma['reason']})"] if rdma.get("skipped") else []
        for pair in rdma.get("pairs") or []:
            best = pair.get("best_avg_gbps")
            out.append(f"rdma {pair['client']} -> {pair['server']}: {best or pair.get('error')}")
        return out
