"""`rackcert burnin`: hours of load on every GPU, link and port at once, watched and judged.

Why: an acceptance run before a rack is signed for (DCGM diag levels 3-4, gpu-burn,
SuperBench's soak, DeepOps' HPL burn-in, Azure's HPC health checks) loads the rack the way
a training job does and names the parts to send back while the warranty is fresh. What runs,
all at once, for `duration` seconds, through the bench's one transport (SSH, or Slurm job
steps where the spec has Slurm):
- `gpu`: on every node, validation.bench.node.burnin (GEMM at the power cap and HBM pattern
  phases per GPU, the 1-s sampler, every counter before and after);
- `node-allreduce`: on every node with two or more GPUs, its own allreduce in a loop
  (validation.bench.node.allreduce_soak under torchrun);
- `rack-allreduce`: one rank a node, every node, in a loop; its first collective with
  NCCL_DEBUG=INFO, whose transport lines are judged (validation.bench.burnin.nccl);
- `pairs`: localisation's link rounds (disjoint pairs, iperf3 or ib_write_bw and a two-rank
  allreduce per pair) at the start and then once an hour, with the rack allreduce paused
  (it fills every ring link; told on its stdin, validation.bench.stdin_control) and the
  node loads running.
Then validation.bench.burnin.judge over all of it: burnin.json's data (BurninData).

    data = run_burnin(nodes, BurninOptions(duration_s=600), progress=print)
"""

from __future__ import annotations

import itertools
import json
import shlex
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rackcert.core.burnin_record import pack_series
from rackcert.core.errors import InputError
from validation.bench.burnin import judge as judging
from validation.bench.burnin import nccl
from validation.bench.localisation.stages import LocaliseOptions, localise
from validation.bench.stdin_control import StdinControl
from validation.bench.transport import (
    Node,
    SrunTarget,
    SrunTransport,
    SshTransport,
    Step,
    Transport,
)

NODE_DIR = Path(__file__).parent.parent / "node"
BURNIN_SOURCE = NODE_DIR / "burnin.py"
SOAK_SOURCE = NODE_DIR / "allreduce_soak.py"
MIX = ("gpu", "node-allreduce", "rack-allreduce", "pairs")
RACK_PORT = 29451
RACK_LOOP = "rackcert-burnin-rack-ar"  # the rack allreduce's step (told to pause: pair rounds)
YIELD_GRACE_S = 120.0  # the loop's start-up (its process group, NCCL's init) before it can pause
Progress = Callable[[str], None]


@dataclass
class BurninOptions:
    """What `rackcert burnin` can be told; defaults are an acceptance run's."""

    duration_s: float = 4 * 3600.0
    quick: bool = False
    mix: tuple[str, ...] = MIX
    interval_s: float = 1.0
    gemm_s: float = 50.0
    hbm_s: float = 10.0
    n: int = 8192
    hbm_fraction: float = 0.9
    pairs_every_s: float = 3600.0
    allreduce_interval_s: float = 10.0
    allreduce_bytes_gpu: int = 256 << 20
    allreduce_bytes_cpu: int = 1 << 20
    python: str = "python3"
    device: str = "auto"
    sysfs_root: str = "/"
    kernel_log: str | None = None
    gpus_per_node: int = 0  # from the spec's template; 0: a CPU node (the lab)
    rdma: bool = False
    launcher: str = "ssh"
    slurm: SrunTarget | None = None
    rules: judging.Rules = field(default_factory=judging.Rules)
    localise: LocaliseOptions = field(default_factory=lambda: LocaliseOptions(stages={"links"}))

    def __post_init__(self) -> None:
        bad = [m for m in self.mix if m not in MIX]
        if bad:
            raise InputError(f"--mix {bad[0]!r}: choose from {', '.join(MIX)}")
        if self.duration_s <= 0:
            raise InputError("--duration must be positive (e.g. 4h, 30m, 600s)")

    @classmethod
    def quick_of(cls, **kw: Any) -> BurninOptions:
        """`--quick`: minutes, not hours; phases and intervals to match."""
        base: dict[str, Any] = {
            "quick": True,
            "duration_s": 120.0,
            "gemm_s": 20.0,
            "hbm_s": 5.0,
            "allreduce_interval_s": 5.0,
            "rules": judging.Rules(window_s=20.0),
        }
        return cls(**{**base, **kw})


def parse_duration(text: str) -> float:
    """`4h`, `30m`, `90s`, `600` -> seconds; InputError with the form wanted."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0}
    t = text.strip().lower()
    try:
        if t and t[-1] in units:
            return float(t[:-1]) * units[t[-1]]
        return float(t)
    except ValueError:
        raise InputError(
            f"--duration {text!r}: want a number with h, m or s (4h, 30m, 90s)"
        ) from None


def transport_of(opts: BurninOptions) -> Transport:
    if opts.launcher == "srun" and opts.slurm is not None:
        return SrunTransport(opts.slurm)
    return SshTransport()


# -- the node commands ------------------------------------------------------------------------
def burnin_command(opts: BurninOptions) -> str:
    argv = [
        opts.python, "-c", BURNIN_SOURCE.read_text(),
        "--duration", f"{opts.duration_s:g}", "--interval", f"{opts.interval_s:g}",
        "--gemm-s", f"{opts.gemm_s:g}", "--hbm-s", f"{opts.hbm_s:g}", "--n", str(opts.n),
        "--hbm-fraction", f"{opts.hbm_fraction:g}", "--sysfs-root", opts.sysfs_root,
        "--xid-every", "5" if opts.quick else "30",
    ]  # fmt: skip
    if opts.device == "cpu":
        argv += ["--device", "cpu"]
    if opts.kernel_log:
        argv += ["--kernel-log", opts.kernel_log]
    return shlex.join(argv)


def _soak_args(opts: BurninOptions) -> list[str]:
    """The loop's options; its size is the GPU one where the spec has GPUs, and the node
    takes the CPU one where it finds none (the lab's template names GPUs it has not)."""
    size = opts.allreduce_bytes_gpu if opts.gpus_per_node else opts.allreduce_bytes_cpu
    device = "cpu" if opts.device == "cpu" else "auto"
    return ["--duration", f"{opts.duration_s:g}", "--interval", f"{opts.allreduce_interval_s:g}",
            "--size-bytes", str(size), "--cpu-size-bytes", str(opts.allreduce_bytes_cpu),
            "--device", device]  # fmt: skip


def node_allreduce_command(opts: BurninOptions) -> str:
    """The node's GPUs under torchrun (a script file: torchrun runs files, not `-c`)."""
    path = "/tmp/rackcert-burnin-soak.py"
    write = shlex.join(
        [opts.python, "-c", "import sys; open(sys.argv[1], 'w').write(sys.argv[2])", path,
         SOAK_SOURCE.read_text()]
    )  # fmt: skip
    run = shlex.join(
        [opts.python, "-m", "torch.distributed.run", "--standalone",
         f"--nproc-per-node={opts.gpus_per_node}", path, *_soak_args(opts)]
    )  # fmt: skip
    return f"{write} && {run}"


def rack_allreduce_commands(nodes: list[Node], opts: BurninOptions) -> tuple[str, ...]:
    """One rank a node; rank 0 on the first node holds the store; NCCL's log on once."""
    master, peer = nodes[0].address, nodes[1].address
    return tuple(
        shlex.join(
            [
                opts.python,
                "-c",
                SOAK_SOURCE.read_text(),
                "--rank",
                str(i),
                "--world",
                str(len(nodes)),
                "--master",
                master,
                "--peer",
                peer,
                "--port",
                str(RACK_PORT),
                "--nccl-debug",
                "--control",
                *_soak_args(opts),
            ]
        )  # fmt: skip
        for i, _n in enumerate(nodes)
    )


# -- the plan -----------------------------------------------------------------------------------
def plan(nodes: list[Node], opts: BurninOptions) -> list[dict[str, str]]:
    """What runs where and for how long (`--plan`)."""
    d = f"{opts.duration_s / 3600:.2f} h" if opts.duration_s >= 3600 else f"{opts.duration_s:g} s"
    names = ", ".join(n.name for n in nodes)
    rows = []
    if "gpu" in opts.mix:
        what = (
            f"GEMM bf16 n={opts.n} at the power cap {opts.gemm_s:g} s, then HBM patterns over"
            f" >= {opts.hbm_fraction:.0%} of free memory {opts.hbm_s:g} s, alternating, per GPU;"
            f" sampler every {opts.interval_s:g} s; counters before and after"
        )
        rows.append({"load": "gpu", "where": names, "how_long": d, "what": what})
    if "node-allreduce" in opts.mix:
        where = names if opts.gpus_per_node >= 2 else "none (fewer than 2 GPUs a node)"
        rows.append({"load": "node-allreduce", "where": where, "how_long": d,
                     "what": f"allreduce loop over the node's GPUs, busbw every"
                             f" {opts.allreduce_interval_s:g} s"})  # fmt: skip
    if "rack-allreduce" in opts.mix:
        where = names if len(nodes) >= 2 else "none (one node)"
        rows.append({"load": "rack-allreduce", "where": where, "how_long": d,
                     "what": "allreduce loop, one rank a node; NCCL transport read from"
                             " NCCL_DEBUG=INFO"})  # fmt: skip
    if "pairs" in opts.mix:
        times = max(1, int(opts.duration_s // opts.pairs_every_s) + 1)
        when = "at the start" + (
            f", then every {opts.pairs_every_s / 3600:g} h" if times > 1 else ""
        )
        rows.append({"load": "pairs", "where": names if len(nodes) >= 2 else "none (one node)",
                     "how_long": f"{times} time(s), {when}",
                     "what": f"localisation's link rounds ({opts.localise.pattern}) with a"
                             " two-rank allreduce per pair"})  # fmt: skip
    return rows


# -- the run --------------------------------------------------------------------------------
def _last_json(text: str, key: str) -> dict[str, Any] | None:
    """The node's record: the last JSON object of its output that has `key`.

    Under srun the record may come in pieces: Slurm 22.05's srun --label forwards a task's
    long line in 1024-byte pieces, each on a line of its own (validation.bench.launch.
    parse_result; a burn-in record of ten seconds is already longer). The transport has
    grouped the lines by task, so a record's pieces follow each other: from each line that
    opens an object, the lines after it are joined and the first JSON value read off them
    (a piece that opens an inner object reads as that object, without `key`, and the search
    goes on backwards)."""
    lines = [ln.rstrip("\r") for ln in text.splitlines()]  # a piece's own spaces are data
    joined = "".join(lines)
    starts = list(itertools.accumulate((len(ln) for ln in lines), initial=0))
    decoder = json.JSONDecoder()
    for i in range(len(lines) - 1, -1, -1):
        at = starts[i] + len(lines[i]) - len(lines[i].lstrip())
        if not joined.startswith("{", at):
            continue
        try:
            value, _end = decoder.raw_decode(joined, at)
        except ValueError:
            continue
        if isinstance(value, dict) and key in value:
            return value
    return None


def run_burnin(
    nodes: list[Node], opts: BurninOptions, *, log: Path | None = None,
    progress: Progress = lambda _m: None,
) -> dict[str, Any]:  # fmt: skip
    """Every load at once; judged; burnin.json's data as a dict (BurninData's shape)."""
    if not nodes:
        raise InputError("burnin: no nodes to load")
    transport = transport_of(opts)
    steps: list[tuple[str, Step]] = []
    if "gpu" in opts.mix:
        steps.append(("gpu", Step.on_all(nodes, burnin_command(opts), "rackcert-burnin-gpu")))
    if "node-allreduce" in opts.mix and opts.gpus_per_node >= 2:
        steps.append(("node-allreduce", Step.on_all(nodes, node_allreduce_command(opts),
                                                     "rackcert-burnin-node-ar")))  # fmt: skip
    if "rack-allreduce" in opts.mix and len(nodes) >= 2:
        steps.append(("rack-allreduce", Step(tuple(nodes), rack_allreduce_commands(nodes, opts),
                                             RACK_LOOP)))  # fmt: skip
    t0 = time.monotonic()
    answers: dict[str, Any] = {}
    control = StdinControl(RACK_LOOP) if any(k == "rack-allreduce" for k, _ in steps) else None

    def loads() -> None:
        got = transport.run([s for _, s in steps], opts.duration_s + 600, log=log,
                            merge_stderr=True, title="burnin loads", control=control)  # fmt: skip
        answers.update(zip([k for k, _ in steps], got, strict=True))

    progress(f"burnin: {', '.join(k for k, _ in steps) or 'no load'} on {len(nodes)} node(s)"
             f" for {opts.duration_s:g} s")  # fmt: skip
    worker = threading.Thread(target=loads, daemon=True)
    worker.start()
    rounds: list[dict[str, Any]] = []
    if "pairs" in opts.mix and len(nodes) >= 2:
        next_at = t0 + min(10.0, opts.duration_s / 10)  # once the loads have started
        while time.monotonic() < t0 + opts.duration_s and next_at < t0 + opts.duration_s:
            time.sleep(max(0.0, next_at - time.monotonic()))
            progress(f"burnin: pair rounds at {time.monotonic() - t0:.0f} s")
            yielded = _yield_fabric(control, opts, progress)
            began = time.time()
            loc = localise(nodes, replace(opts.localise, stages={"links"}), log=log,
                           progress=progress)  # fmt: skip
            if control is not None:
                control.tell("RESUME")
            loc["at_s"] = round(time.monotonic() - t0, 1)
            loc["wall"] = (began, time.time())
            loc["loop_yielded"] = yielded
            rounds.append(loc)
            next_at += opts.pairs_every_s
    worker.join()
    return assemble(nodes, opts, answers, rounds)


def _yield_fabric(control: StdinControl | None, opts: BurninOptions, progress: Progress) -> bool:
    """The rack allreduce paused before a pair round (True), or not within its wait.

    The loop fills every ring link; a pair measured beside it reads only what the loop
    leaves (in the lab, ring links read 0.59-0.66x of the others and were named as bad
    cables). The loop pauses at its next interval's start; its first answer can also wait
    for its start-up (process group, calibration)."""
    if control is None:
        return True
    wait = 2 * opts.allreduce_interval_s + YIELD_GRACE_S
    if control.ask("PAUSE", "PAUSED", timeout_s=wait):
        return True
    progress(f"burnin: the rack allreduce did not pause within {wait:g} s; links measured"
             " beside its traffic")  # fmt: skip
    return False


def assemble(
    nodes: list[Node], opts: BurninOptions, answers: dict[str, Any], rounds: list[dict[str, Any]]
) -> dict[str, Any]:
    """The loads' answers and the pair rounds, judged, as BurninData's dict."""
    records: dict[str, dict[str, Any]] = {}
    node_rows = []
    if "gpu" in answers:
        ans = answers["gpu"]
        for n in nodes:
            rec = _last_json(ans.output(n.name), "series")
            if rec is None or "series" not in rec:
                records[n.name] = {"error": ans.why(n.name)}
                node_rows.append({"node": n.name, "device": "?", "nvml": False, "duration_s": 0,
                                  "interval_s": opts.interval_s, "samples": 0,
                                  "error": ans.why(n.name)})  # fmt: skip
                continue
            records[n.name] = rec
            notes = [ln for ln in ans.output(n.name).splitlines() if ln.startswith("burnin:")]
            node_rows.append({"node": n.name, "device": rec["device"], "nvml": rec["nvml"],
                              "driver": rec.get("driver"), "duration_s": rec["duration_s"],
                              "interval_s": rec["interval_s"], "samples": len(rec["series"]["t"]),
                              "notes": notes[:10]})  # fmt: skip
    rules = opts.rules
    found, told, gpus, unmeasured = judging.judge_nodes(records, rules)
    loops = _loops(nodes, opts, answers)
    found += judging.judge_loops(loops, rules, [r["wall"] for r in rounds])
    if not rules.judge_cpu_rate:
        unmeasured += [
            f"{lp['name']} allreduce on Gloo (no GPU): recorded, not judged (its ranks share"
            " the node's CPU cores)" for lp in loops if judging.cpu_only(lp)
        ]  # fmt: skip
    ranks: list[dict[str, Any]] = []
    if "rack-allreduce" in answers:
        text = "\n".join(answers["rack-allreduce"].output(n.name) for n in nodes)
        ranks = nccl.parse(text)
        backend = next((lp.get("backend") for lp in loops if lp["name"] == "rack"), None)
        if backend == "nccl" and not ranks:
            unmeasured.append("rack allreduce: NCCL wrote no transport lines")
        for line in nccl.judge(ranks, rdma=opts.rdma):
            rank = line.split()[2].rstrip(":")
            found.append(judging._f("nccl.transport", "nccl", rank.split(":")[0], rank, line))
        if backend == "gloo":
            unmeasured.append("rack allreduce on Gloo (no GPU): no NCCL transport to judge")
    for loc in rounds:
        if loc.get("loop_yielded") is False:
            unmeasured.append(
                f"pair round at {loc['at_s']:g} s: the rack allreduce did not pause; its links"
                " were measured beside the loop's traffic"
            )
        unmeasured += [
            f"pair round at {loc['at_s']:g} s: {p['a']}<->{p['b']}: {p['error']}"
            for p in loc.get("links") or []
            if p.get("error")
        ]
        for f in loc.get("findings") or []:
            kind = "link" if f["kind"] == "link" else "node"
            found.append({
                "id": f"burnin.{f['id'].removeprefix('bench.')}", "rule": f"pairs.{f['kind']}",
                "kind": kind, "node": (f.get("nodes") or ["rack"])[0], "part": f["target"],
                "before": f.get("reference"), "after": f.get("value"), "at_s": loc["at_s"],
                "message": f"pair round at {loc['at_s']:g} s: {f['message']}",
            })  # fmt: skip
    seen: set[str] = set()
    unique = [f for f in found if not (f["id"] in seen or seen.add(f["id"]))]  # type: ignore[func-returns-value]
    return {
        "schema": 1,
        "duration_s": opts.duration_s,
        "quick": opts.quick,
        "launcher": opts.launcher,
        "mix": list(opts.mix),
        "rules": {**rules.to_dict(), "rdma": opts.rdma, "pairs": _pair_rule(opts.localise)},
        "nodes": node_rows,
        "gpus": gpus,
        "loops": loops,
        "nccl": ranks,
        "pair_rounds": [_round_summary(r) for r in rounds],
        "findings": unique,
        "reported": told,
        "unmeasured": unmeasured,
        "verdict": "FAIL" if unique else "PASS",
        "series_zlib_b64": pack_series({k: v for k, v in records.items() if "series" in v}),
    }


def _pair_rule(loc: LocaliseOptions) -> dict[str, Any]:
    """How the pair rounds' links were judged (the line rate only where the CLI gave one:
    validation.bench.burnin.pairs_line_rate)."""
    line = loc.line_rate_gbps
    return {
        "median_fraction": loc.median_fraction,
        "link_fraction": loc.link_fraction if line else None,
        "line_rate_gbps": line,
        "line_rate_source": loc.line_rate_source if line else None,
    }


def _loops(nodes: list[Node], opts: BurninOptions, answers: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    if "node-allreduce" in answers:
        for n in nodes:
            out.append(_loop(f"node {n.name}", [n.name], answers["node-allreduce"], n.name, opts))
    if "rack-allreduce" in answers:
        out.append(_loop("rack", [n.name for n in nodes], answers["rack-allreduce"],
                         nodes[0].name, opts))  # fmt: skip
    return out


def _loop(name: str, where: list[str], ans: Any, first: str, opts: BurninOptions) -> dict[str, Any]:
    rec = _last_json(ans.output(first), "busbw_gb_s")
    row: dict[str, Any] = {"name": name, "nodes": where, "interval_s": opts.allreduce_interval_s}
    if rec is None or not isinstance(rec.get("busbw_gb_s"), list):
        return {**row, "error": ans.why(first)}
    vals = [float(v) for v in rec["busbw_gb_s"] if isinstance(v, int | float)]
    med = sorted(vals)[len(vals) // 2] if vals else None
    err = None if rec.get("correct") else "wrong allreduce result"
    starts = [float(v) for v in rec.get("starts") or [] if isinstance(v, int | float)]
    paused = [[float(v) for v in span] for span in rec.get("paused") or []]
    return {**row, "backend": rec.get("backend"), "busbw_gb_s": vals, "median_gb_s": med,
            "starts": starts, "paused": paused, "error": err}  # fmt: skip


def _round_summary(loc: dict[str, Any]) -> dict[str, Any]:
    return {
        "at_s": loc.get("at_s"),
        "engine": loc.get("engine"),
        "rounds": loc.get("rounds"),
        "wall": list(loc.get("wall") or []),
        "loop_yielded": loc.get("loop_yielded"),
        "links": [
            {k: p.get(k) for k in ("a", "b", "gbps", "error")}
            | {"allreduce_busbw_gb_s": (p.get("allreduce") or {}).get("busbw_gb_s")}
            for p in loc.get("links") or []
        ],
        "findings": [f["id"] for f in loc.get("findings") or []],
    }
