"""Localisation: which node, GPU or link holds the rack back, named in the verdict.

Why: `rackcert bench` judges the rack as a whole; when it fails, the team needs the part.
This stage does what SuperBench, ClusterKit, IMB `-multi` and DCGM diag do in a bring-up:
1. per node, all nodes at once: each GPU alone, then the node's allreduce
   (validation.bench.node.probe, sent to every node over SSH);
2. per link, in rounds of disjoint pairs (validation.bench.localisation.schedule): iperf3 both ways
   (validation.bench.localisation.linkprobe), or ib_write_bw + ib_write_lat where every node has an
   RDMA device and perftest; wall time ~ rounds x one pair's time;
3. the per-rank images/s of the scaling runs already in bench.json;
then every figure against its absolute threshold and the rack's own median
(validation.bench.localisation.outliers and .findings), one verdict check per finding.

The record: bench.json `data.localise` (schema 1; other stages read it, keep it stable):

    {
      "schema": 1,
      "pattern": "round-robin",            # round-robin | ring | all-pairs | k-batch
      "k": null,                           # k-batch's k
      "engine": "iperf3",                  # iperf3 | ib_write_bw (the link stage's tool)
      "launcher": "ssh",                   # ssh | srun (Slurm job steps)
      "pair_allreduce": true,              # each round's pairs also ran a 2-rank allreduce
      "nodes_measured": ["lab-node1", ...],
      "line_rate_gbps": 0.2, "line_rate_source": "certification.line_rate_gbps",
      "rules": {"link": {"metric": "bandwidth", "unit": "Gb/s", "median_fraction": 0.7,
                         "absolute_min": 0.16, "absolute_source": "0.8 x line rate ..."},
                "link_allreduce": {...},   # the links' two-node allreduce busbw, GB/s
                "gemm_gflops": {...}, "h2d_gb_s": {...}, "d2h_gb_s": {...}, "pcie": {...},
                "node_allreduce": {...}, "rank": {...}},
      "rounds": [[["lab-node1", "lab-node4"], ["lab-node2", "lab-node3"]], ...],
      "links": [{"a": "lab-node1", "b": "lab-node4", "round": 0, "engine": "iperf3",
                 "gbps": 0.194, "forward_gbps": 0.195, "reverse_gbps": 0.194,
                 "rtt_min_us": 41.0, "latency_us": null, "wall_s": 1.3, "error": null,
                 "allreduce": {"backend": "gloo", "busbw_gb_s": 0.011, "size_bytes": 1048576,
                               "correct": true, "error": null, ...}}],  # with pair_allreduce
      "nodes": [{"node": "lab-node1", "device": "cpu", "engine": "numpy",
                 "units": [{"unit": "cpu" | "GPU0", "pci": null | "0000:17:00.0",
                            "gemm_gflops": 9.1, "memcpy_gb_s": 4.2,   # CPU
                            "h2d_gb_s": 25.1, "d2h_gb_s": 26.0}],     # GPU
                 "smi": [{"index": 0, "pci": "0000:17:00.0", "pcie_gen": 4, ...}],
                 "allreduce": {"ranks": 2, "busbw_gb_s": ...} | null,
                 "notes": [], "error": null}],
      "ranks": [{"label": "2 node(s), 4 GPU(s): resnet",
                 "ranks": [{"rank": 0, "host": "lab-node1", "bus_id": null,
                            "images_per_sec": 41.2}]}],
      "numbers": {"links": {"n": 6, "median": ..., "mad": ..., "min": ..., "max": ...,
                            "reference": ..., "reference_is": "...", "slow": [...]}, ...},
      "findings": [{"id": "bench.link[lab-node2<->lab-node5]", "kind": "link",
                    "target": "lab-node2<->lab-node5", "nodes": ["lab-node2", "lab-node5"],
                    "pci": null, "metric": "bandwidth", "value": 0.08, "unit": "Gb/s",
                    "reference": 0.194, "ratio": 0.41, "observed": "...", "expected": "...",
                    "message": "bench.link[lab-node2<->lab-node5]: 0.08 Gb/s, 0.41x rack
                                median 0.194 Gb/s"}],
      "confirm": {"tried": ["bench.link[...]"], "cleared": [], "rounds": [...],
                  "nodes_again": false, "new": [], "wall_s": 2.3},  # localisation.confirm
      "timing": {"node_stage_s": 7.0, "link_stage_s": 11.6, "rounds": 3, "rounds_s": 5.8,
                 "pair_s": 1.9, "rounds_over_pair": 3.1, "pairs": 6, "total_s": 19.8},
      "skipped": {"links": "one node: no pair"}     # a stage not run, and why
    }

Finding kinds: `link` (one pair), `node` (every link of the node slow, or its probe
failed), `gpu` (node + PCI address), `compute` (a node's CPU in the lab),
`node_allreduce` (the allreduce inside a node), `rank` (a rank of a scaling run).
"""

from __future__ import annotations

import json
import shlex
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rackcert.core.errors import InputError
from rackcert.core.runs import RunDir
from rackcert.core.spec import Spec
from rackcert.core.stage_records import BenchData, BenchRecord, LocaliseRecord
from rackcert.core.untrusted import cap_strings
from validation.bench import perftest
from validation.bench.localisation import colocated, confirm, linkprobe, schedule
from validation.bench.localisation import findings as judging
from validation.bench.node import pair_allreduce
from validation.bench.transport import (
    Answer,
    Node,
    SrunTarget,
    SrunTransport,
    SshTransport,
    Step,
    Transport,
)

SCHEMA = 1
PROBE_SOURCE = Path(__file__).parent.parent / "node" / "probe.py"
Progress = Callable[[str], None]
LAT_MARK = "rackcert-lat"  # between ib_write_bw's and ib_write_lat's output in one step
SERVER_WAIT_S = 30  # how long a pair's client waits for its one-off server to listen


@dataclass
class LocaliseOptions:
    """What `rackcert bench --localise` can be told; defaults are a bring-up's."""

    pattern: str = "round-robin"
    k: int = 4
    pair_seconds: int = 2  # each pair's iperf3 run (both directions at once)
    node_seconds: float = 1.0  # each timed loop of the per-node stage
    median_fraction: float = 0.7
    link_fraction: float = 0.8
    line_rate_gbps: float | None = None
    line_rate_source: str = ""
    python: str = "python3"
    node_allreduce: bool = True
    device: str = "auto"  # the per-node stage's: auto | cuda | cpu
    engine: str = "auto"  # per-node stage: auto (torch on GPUs, numpy on CPUs) | torch | numpy
    stages: set[str] = field(default_factory=lambda: {"nodes", "links"})
    timeout_s: float = 300.0
    # each round's pairs also run a two-rank allreduce; None: where the per-node stage
    # found GPUs on every node (pair_allreduce_auto)
    pair_allreduce: bool | None = False
    confirm: bool = (
        True  # a named part is measured once more (validation.bench.localisation.confirm)
    )
    launcher: str = "ssh"  # ssh | srun (Slurm job steps: validation.bench.transport)
    slurm: SrunTarget | None = None  # with srun: partition, reservation, client conf

    def __post_init__(self) -> None:
        if self.pattern not in schedule.PATTERNS:
            raise InputError(
                f"--pattern {self.pattern!r}: choose one of {', '.join(schedule.PATTERNS)}"
            )
        if self.k < 1:
            raise InputError("--k-batch: k must be at least 1")
        if self.launcher not in ("ssh", "srun"):
            raise InputError(f"localise launcher {self.launcher!r}: ssh or srun")
        if self.launcher == "srun" and self.slurm is None:
            self.slurm = SrunTarget()
        for name in ("median_fraction", "link_fraction"):
            if not 0 < getattr(self, name) <= 1:
                raise InputError(f"{name} {getattr(self, name)}: want a fraction in (0, 1]")


def transport_of(opts: LocaliseOptions) -> Transport:
    """How the stages reach the nodes: SSH, or Slurm job steps (`--launcher srun`)."""
    if opts.launcher == "srun" and opts.slurm is not None:
        return SrunTransport(opts.slurm)
    return SshTransport()


# -- stage 1: every node at once -----------------------------------------------------------
def probe_command(opts: LocaliseOptions, python: str | None = None) -> str:
    """The remote shell line: the probe's source as `python -c`, all nodes at one barrier
    (`python`: another interpreter than the nodes', the controller's for a reference)."""
    argv = [
        python or opts.python,
        "-c",
        PROBE_SOURCE.read_text(),
        "--barrier",
        "--duration",
        f"{opts.node_seconds:g}",
        "--device",
        opts.device,
        "--engine",
        opts.engine,
    ]
    if opts.node_allreduce:
        argv.append("--allreduce")
    return shlex.join(argv)


def node_stage(nodes: list[Node], opts: LocaliseOptions, log: Path | None) -> list[dict[str, Any]]:
    """The probe on every node as one step, all timed loops starting at one barrier."""
    step = Step.on_all(nodes, probe_command(opts), "rackcert-localise-nodes")
    (ans,) = transport_of(opts).run(
        [step], opts.timeout_s, barrier=True, log=log, title="node stage"
    )
    return node_rows(nodes, ans)


def node_rows(nodes: list[Node], ans: Answer) -> list[dict[str, Any]]:
    """One row per node from the probe's last line (its error where it printed none)."""
    out = []
    for n in nodes:
        mine = [ln for ln in ans.output(n.name).splitlines() if ln.strip()]
        try:
            figures = json.loads(mine[-1]) if mine else None
        except ValueError:
            figures = None
        if isinstance(figures, dict):
            out.append(
                {**figures, "node": n.name, "reported_hostname": figures.get("node"), "error": None}
            )
        else:
            why = ans.why(n.name)
            out.append({"node": n.name, "error": why, "units": [], "smi": [], "allreduce": None})
    return out


# -- stage 2: links in rounds of disjoint pairs --------------------------------------------
def rdma_ready(nodes: list[Node], transport: Transport, log: Path | None) -> str | None:
    """None when every node has an RDMA device and perftest; else why not (TCP then)."""
    step = Step.on_all(nodes, perftest.PROBE, "rackcert-localise-rdma")
    (ans,) = transport.run([step], 60, log=log, title="rdma probe")
    for n in nodes:
        if n.name not in ans.outputs:
            return f"{n.name}: no answer ({ans.why()})"
        why = perftest.skip_reason(n.name, perftest.parse_probe(ans.output(n.name)))
        if why:
            return why
    return None


def link_stage(
    nodes: list[Node],
    opts: LocaliseOptions,
    log: Path | None,
    progress: Progress,
    rounds: list[list[tuple[str, str]]] | None = None,
    engine: str | None = None,
) -> tuple[list[list[tuple[str, str]]], list[dict[str, Any]], str, list[float]]:
    """(rounds, one record per pair, engine, each round's wall): each round's pairs at once.
    `rounds` and `engine` given (a confirmation): those pairs, with that tool.

    Where a step's daemons outlive it (SSH), iperf3 runs as a daemon on every node for the
    stage; under Slurm each pair's step starts a one-off server (`iperf3 -s -1`) beside its
    client, and a pair without a figure is measured once more (iperf3 -J can exit 0 with an
    "error" key, e.g. "the server is busy running a test", when a connection of the first
    try's retry loop reached the one-off server first)."""
    transport = transport_of(opts)
    by_name = {n.name: n for n in nodes}
    if rounds is None:
        rounds = schedule.rounds(opts.pattern, [n.name for n in nodes], opts.k)
    if engine is None:
        engine = "iperf3" if rdma_ready(nodes, transport, log) else perftest.BINARY
    daemons = engine == "iperf3" and transport.persistent
    results: list[dict[str, Any]] = []
    round_walls: list[float] = []
    if daemons:
        starts = Step(tuple(nodes), tuple(linkprobe.server_start(n.address) for n in nodes))
        transport.run([starts], 60)
    try:
        for i, rnd in enumerate(rounds):
            progress(f"  links round {i + 1}/{len(rounds)}: {len(rnd)} pair(s) at once")
            t0 = time.monotonic()
            rows = link_round(transport, i, rnd, by_name, engine, opts, log, daemons=daemons)
            if opts.pair_allreduce:
                pair_allreduce_round(transport, i, rnd, by_name, opts, log, rows)
            results += rows
            round_walls.append(time.monotonic() - t0)
    finally:
        if daemons:
            stops = Step(tuple(nodes), tuple(linkprobe.server_stop(n.address) for n in nodes))
            transport.run([stops], 60)
    return rounds, results, engine, round_walls


def pair_commands(a: Node, b: Node, engine: str, seconds: int, daemons: bool) -> tuple[str, str]:
    """The pair's lines: the client on a, the server on b ("" where b's daemon serves)."""
    if engine == "iperf3" and daemons:
        return linkprobe.client_command(b.address, seconds), ""
    if engine == "iperf3":
        # A step's tasks start when each node's Prolog is done (a site's health check: seconds
        # apart on a busy rack), so the client retries a refused connection for SERVER_WAIT_S.
        server = (
            f"timeout {seconds + SERVER_WAIT_S + 30} {linkprobe.IPERF3} -s -1 -p {linkprobe.PORT}"
        )
        client = linkprobe.client_command(b.address, seconds, tries=int(SERVER_WAIT_S / 0.3))
        return client, f"{server} >/dev/null 2>&1"
    port = perftest.PORT + 1
    server = f"{perftest.server_command(None, False)}; {linkprobe.lat_server(None, port)}"
    client = (
        f"{perftest.client_command(b.address, None, False)}; echo {LAT_MARK};"
        f" {linkprobe.lat_client(b.address, None, port)}"
    )
    return client, f"{server} >/dev/null 2>&1"


def link_round(
    transport: Transport,
    i: int,
    rnd: list[tuple[str, str]],
    by_name: dict[str, Node],
    engine: str,
    opts: LocaliseOptions,
    log: Path | None,
    *,
    daemons: bool,
) -> list[dict[str, Any]]:
    """One step per pair of the round, all at once; without daemons, a pair without a
    figure once more."""

    def measure(pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
        steps = [
            Step.pair(
                by_name[a],
                by_name[b],
                *pair_commands(by_name[a], by_name[b], engine, opts.pair_seconds, daemons),
                name="rackcert-localise-link",
            )
            for a, b in pairs
        ]
        answers = transport.run(steps, opts.timeout_s, log=log, title=f"round {i} {engine}")
        out = []
        for (a, b), ans in zip(pairs, answers, strict=True):
            text = ans.output(a)
            row: dict[str, Any] = {"a": a, "b": b, "round": i, "engine": engine,
                                   "wall_s": ans.wall_s, "latency_us": None,
                                   "error": None}  # fmt: skip
            if not daemons:
                row["attempts"] = 1
            if not text.strip():
                row.update(gbps=None, error=f"no answer: {ans.why(a)}")
            elif engine == "iperf3":
                row.update(linkprobe.iperf3_figures(text))
            else:
                bw, _, lat = text.partition(LAT_MARK)
                row.update(linkprobe.rdma_figures(bw, lat))
            out.append(row)
        return out

    rows = measure(rnd)
    again = [j for j, r in enumerate(rows) if r["error"]]
    if again and not daemons:
        retry = measure([rnd[j] for j in again])
        for j, row in zip(again, retry, strict=True):
            row["attempts"] = 2
            row["first_error"] = rows[j]["error"]
            rows[j] = row
    return rows


def pair_allreduce_round(
    transport: Transport,
    i: int,
    rnd: list[tuple[str, str]],
    by_name: dict[str, Node],
    opts: LocaliseOptions,
    log: Path | None,
    rows: list[dict[str, Any]],
) -> None:
    """Every pair's two-rank allreduce at once (validation.bench.node.pair_allreduce): rank 0
    on the pair's first node, rank 1 on its second; `allreduce` added to each row."""
    steps = []
    for a, b in rnd:
        na, nb = by_name[a], by_name[b]
        r0, r1 = (
            pair_allreduce.command(opts.python, r, na.address, nb.address, device=opts.device)
            for r in (0, 1)
        )
        steps.append(Step.pair(na, nb, r0, r1, name="rackcert-localise-allreduce"))
    answers = transport.run(steps, opts.timeout_s, log=log, title=f"round {i} pair allreduce")
    for (a, _b), ans, row in zip(rnd, answers, rows, strict=True):
        row["allreduce"] = pair_allreduce.row_figures(ans.output(a) or f"no answer: {ans.why(a)}")
        row["allreduce"]["wall_s"] = ans.wall_s


# -- stage 3: the scaling runs' ranks -------------------------------------------------------
def scaling_ranks(bench: BenchData | None) -> list[dict[str, Any]]:
    """Each recorded ResNet50 launch's per-rank images/s, with the rank's host and GPU."""
    out = []
    for launch in bench.launches if bench is not None else []:
        ranks = launch.ranks or []
        means = (launch.answer("resnet") or {}).get("per_rank_mean") or []
        if len(means) < 2 or len(ranks) != len(means):
            continue
        rows = [
            {
                "rank": r.rank,
                "host": r.host or f"rank{i}",
                "bus_id": r.bus_id,
                "images_per_sec": m,
            }
            for i, (r, m) in enumerate(zip(ranks, means, strict=True))
        ]
        out.append({"label": launch.label, "ranks": rows})
    return out


# -- the whole stage ------------------------------------------------------------------------
def localise(
    nodes: list[Node],
    opts: LocaliseOptions,
    *,
    bench: BenchData | None = None,
    log: Path | None = None,
    progress: Progress = lambda _m: None,
) -> dict[str, Any]:
    """Run the stages on `nodes` and return the `localise` record block, judged."""
    t0 = time.monotonic()
    rec: dict[str, Any] = {
        "schema": SCHEMA,
        "pattern": opts.pattern,
        "k": opts.k if opts.pattern == "k-batch" else None,
        "engine": None,
        "launcher": opts.launcher,
        "pair_allreduce": opts.pair_allreduce,
        "nodes_measured": [n.name for n in nodes],
        "line_rate_gbps": opts.line_rate_gbps,
        "line_rate_source": opts.line_rate_source,
        "rules": judging.rules(
            opts.median_fraction, opts.link_fraction, opts.line_rate_gbps, opts.line_rate_source
        ),
        "rounds": [],
        "links": [],
        "nodes": [],
        "ranks": scaling_ranks(bench),
        "skipped": {},
        "timing": {},
    }
    if "nodes" in opts.stages:
        progress(f"localise: per-node stage on {len(nodes)} node(s) at once")
        rec["nodes"] = node_stage(nodes, opts, log)
        colocated.mark(rec["nodes"])
        rec["timing"]["node_stage_s"] = time.monotonic() - t0
    if opts.pair_allreduce is None:
        opts = replace(opts, pair_allreduce=pair_allreduce_auto(rec["nodes"]))
    rec["pair_allreduce"] = opts.pair_allreduce
    if "links" in opts.stages and len(nodes) >= 2:
        t1 = time.monotonic()
        rounds, links, engine, walls = link_stage(nodes, opts, log, progress)
        wall = time.monotonic() - t1
        # one pair's time: its bandwidth run plus its allreduce (when run), SSH included
        pair = statistics.median(_pair_wall(p) for p in links) if links else None
        rec.update(rounds=[[list(p) for p in r] for r in rounds], links=links, engine=engine)
        rec["timing"].update(
            link_stage_s=wall,  # with the RDMA probe and iperf3 daemons' start and stop
            rounds=len(rounds),
            rounds_s=sum(walls),
            pair_s=pair,  # one pair's time: the median pair's
            rounds_over_pair=sum(walls) / pair if pair else None,
            pairs=len(links),
        )
    elif "links" in opts.stages:
        rec["skipped"]["links"] = "one node: no pair to measure"
    rec["findings"] = _judge(rec)
    if opts.confirm:
        rec["confirm"] = {"tried": [], "cleared": []}
        if rec["findings"]:
            t1 = time.monotonic()
            engine = rec["engine"]
            rec = confirm.confirm(
                rec,
                lambda rounds: link_stage(nodes, opts, log, progress, rounds=rounds, engine=engine)[
                    1
                ],
                lambda: node_stage(nodes, opts, log),
                _judge,
                progress,
            )
            rec["timing"]["confirm_s"] = time.monotonic() - t1
    rec["timing"]["total_s"] = time.monotonic() - t0
    return rec


def _judge(rec: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's findings (validation.bench.localisation.findings); its `numbers` set
    beside them."""
    found, rec["numbers"] = judging.judge(rec)
    return [f.to_dict() for f in found]


def _pair_wall(row: dict[str, Any]) -> float:
    return float(row["wall_s"]) + float((row.get("allreduce") or {}).get("wall_s") or 0.0)


def line_rate(spec: Spec, option_gbps: float | None) -> tuple[float | None, str]:
    """The links' line rate and where it comes from (as validation.bench.links says it)."""
    from validation.bench import links

    if option_gbps:
        return option_gbps, links.OPTION_SOURCE
    if spec.certification.line_rate_gbps:
        return spec.certification.line_rate_gbps, links.OVERRIDE_SOURCE
    rate = spec.line_rate_gbps()
    return rate, links.NIC_SOURCE if rate else ""


def options_for(spec: Spec, bench: Any, **given: Any) -> LocaliseOptions:
    """LocaliseOptions from the spec's thresholds and the bench's options (`given` wins)."""
    from validation.bench.targets import remote_python

    rate, source = line_rate(spec, bench.line_rate_gbps)
    cert = spec.certification
    base: dict[str, Any] = {
        "median_fraction": cert.median_fraction_min,
        "link_fraction": cert.link_bandwidth_fraction_min,
        "line_rate_gbps": rate,
        "line_rate_source": source,
        "python": remote_python(spec, bench),
        "timeout_s": min(bench.timeout_s, 600.0),
    }
    if bench.launcher == "srun" and spec.slurm is not None:
        base["launcher"] = "srun"
        base["slurm"] = SrunTarget(
            partition=spec.slurm.partition,
            reservation=bench.reservation,
            immediate_s=spec.slurm.job_timeout_s,
            client_conf=spec.slurm.client_conf,
        )
    return LocaliseOptions(**{**base, **given})


def pair_allreduce_auto(node_rows: list[dict[str, Any]]) -> bool:
    """`--pair-allreduce` left to rackcert: on where it is cheap next to what it tells,
    i.e. when the per-node stage found GPUs on every node (NCCL over the rack's fabric);
    off on CPU nodes (the lab: one torch start per rank per round, 2-5 s on a busy 2-core
    machine, costs more than the round's iperf3) and without a per-node stage."""
    return bool(node_rows) and all(n.get("device") == "cuda" for n in node_rows)


def run_into(
    spec: Spec,
    run: RunDir,
    bench: Any,
    opts: LocaliseOptions,
    record: BenchRecord,
    progress: Progress,
) -> BenchRecord:
    """Localise on the bench's nodes; bench.json written again with `localise` and the verdict
    over both: a new record, typed throughout (`record` is left as the bench wrote it)."""
    from validation.bench import orchestrate, targets, verdict

    if bench.local:
        raise InputError("--localise measures nodes and the links between them: not with --local")
    vms = targets.select_vms(spec, bench.vms)
    nodes = targets.nodes_of(spec, tuple(vms), bench)
    log = run.artifacts("bench") / "localise.log"
    raw = localise(nodes, opts, bench=record.data, log=log, progress=progress)
    # the nodes' figures and words, cut as every record's are, typed once here
    where = str(run.artifacts("bench").relative_to(run.path))
    part = LocaliseRecord.model_validate(cap_strings(raw, where=where))
    for f in part.findings:
        progress(f"  {f.message}")
    data = record.data.model_copy(update={"localise": part})
    data = data.model_copy(update={"verdict": verdict.judge_bench(spec, data)})
    return orchestrate.write_record(run, data, record.status, record.error, record.started_at)
