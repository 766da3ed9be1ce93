"""The burn-in's verdicts: each node's watch (validation.bench.node.burnin) judged, each finding
naming the part a vendor takes back.

The rules and where they come from (docs/burnin.md says more):
- any double-bit (uncorrectable) ECC error, volatile or aggregate, new or old: NVIDIA's
  ECC guidance treats a DBE as a retire/RMA event;
- new single-bit ECC errors beyond `sbe_new_max` during the run;
- a row remap that became pending or failed, or new uncorrectable remapped rows (NVIDIA's
  A100/H100 row-remapping guide: a failure or a pending remap needs a reset, then the RMA
  path); a retired page that became pending (pre-Ampere);
- a fatal XID in the kernel log during the run (NVIDIA's XID catalogue; Azure's HPC health
  checks' fatal set: 48, 56-58, 62-65, 68, 69, 73, 74, 79-81, 92, 119, 120); other XIDs are
  reported;
- a clocks-event reason of the hardware ever asserted: HW slowdown, HW thermal slowdown, HW
  power brake (NVML's nvmlClocksEventReasons); the SW power cap under a GEMM at the cap is
  expected, reported with its share of the samples; SW thermal slowdown is reported (its
  effect, a sag, has a rule of its own);
- the GEMM rate of the last window below `median_fraction` x the GPU's own first window (a
  sag), or x the rack's median of last windows;
- any HBM pattern mismatch (bytes and the first offset);
- a port whose error counters grew or whose state left ACTIVE (the InfiniBand sysfs ABI);
- NVLink replay/recovery/CRC counters and the PCIe replay counter that grew;
- an allreduce interval below `median_fraction` x its loop's own median (a link that flaps);
- an NCCL transport that is not the spec's (validation.bench.burnin.nccl).

    findings, reported, gpus = judge_nodes(records, Rules())
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from validation.bench.node.burnin import PORT_COUNTERS, REASONS

# Azure HPC health checks' fatal XIDs (NOTES), each in NVIDIA's XID catalogue
FATAL_XIDS = frozenset({48, 56, 57, 58, 62, 63, 64, 65, 68, 69, 73, 74, 79, 80, 81, 92, 119, 120})
HW_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake")
REPORTED_REASONS = ("sw_power_cap", "sw_thermal_slowdown")


@dataclass(frozen=True)
class Rules:
    """What a finding is; `median_fraction` is the spec's certification.median_fraction_min."""

    median_fraction: float = 0.7
    sbe_new_max: int = 10
    pcie_replay_new_max: int = 0
    nvlink_new_max: int = 0
    window_s: float = 60.0  # the GEMM rate's first and last windows
    judge_cpu_rate: bool = False  # a lab node's CPU GEMM shares its cores: recorded only

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "fatal_xids": sorted(FATAL_XIDS), "hw_reasons": list(HW_REASONS)}


def _f(rule: str, kind: str, node: str, part: str, message: str, **kw: Any) -> dict[str, Any]:
    return {
        "id": f"burnin.{rule}[{node}/{part}]",
        "rule": rule,
        "kind": kind,
        "node": node,
        "part": part,
        "message": f"{node} {part}: {message}",
        **kw,
    }


def _gpu_name(g: dict[str, Any]) -> str:
    return f"GPU{g['index']}" + (f" s/n {g['serial']}" if g.get("serial") else "")


def _part(g: dict[str, Any]) -> str:
    return g.get("serial") or f"GPU{g['index']}"


def _first_at(ts: list[float], col: list[Any], pred: Any) -> float | None:
    for t, v in zip(ts, col, strict=False):
        if v is not None and pred(v):
            return t
    return None


def window_rate(ts: list[float], rates: list[Any], first: bool, window_s: float) -> float | None:
    """The median GEMM rate of the first (or last) `window_s` seconds that had GEMM work."""
    pts = [(t, r) for t, r in zip(ts, rates, strict=False) if r is not None]
    if not pts:
        return None
    edge = pts[0][0] + window_s if first else pts[-1][0] - window_s
    sel = [r for t, r in pts if (t <= edge if first else t >= edge)]
    return statistics.median(sel) if sel else None


# -- one GPU ---------------------------------------------------------------------------------
def judge_gpu(
    node: str, g: dict[str, Any], rec: dict[str, Any], rules: Rules
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """(findings, reported, summary) of one GPU."""
    i = str(g["index"])
    ts = rec["series"]["t"]
    col = rec["series"]["gpus"].get(i, {})
    b = rec["counters"]["before"]["gpus"].get(i) or {}
    a = rec["counters"]["after"]["gpus"].get(i) or {}
    name, part = _gpu_name(g), _part(g)
    where = {"serial": g.get("serial"), "pci": g.get("pci")}
    found: list[dict[str, Any]] = []
    told: list[dict[str, Any]] = []

    ecc_b, ecc_a = b.get("ecc") or {}, a.get("ecc") or {}
    dbe_after = max((ecc_a.get(k) or 0) for k in ("volatile_dbe", "aggregate_dbe")) if ecc_a else 0
    dbe_seen = max((v for v in col.get("ecc_dbe", []) if v is not None), default=0)
    if max(dbe_after, dbe_seen):
        found.append(_f("ecc_dbe", "gpu", node, part,
                        f"{name} at {g.get('pci')}: double-bit ECC errors"
                        f" {ecc_b.get('aggregate_dbe')} -> {ecc_a.get('aggregate_dbe')}"
                        " (aggregate),"
                        f" {ecc_b.get('volatile_dbe')} -> {ecc_a.get('volatile_dbe')} (volatile)",
                        before=ecc_b, after=ecc_a,
                        at_s=_first_at(ts, col.get("ecc_dbe", []), lambda v: v > 0),
                        **where))  # fmt: skip
    sbe_new = (ecc_a.get("aggregate_sbe") or 0) - (ecc_b.get("aggregate_sbe") or 0)
    sbe_new = max(sbe_new, (ecc_a.get("volatile_sbe") or 0) - (ecc_b.get("volatile_sbe") or 0))
    if sbe_new > rules.sbe_new_max:
        base = ecc_b.get("volatile_sbe") or 0
        found.append(_f("ecc_sbe", "gpu", node, part,
                        f"{name} at {g.get('pci')}: {sbe_new} new single-bit ECC errors"
                        f" (rule: at most {rules.sbe_new_max})", before=ecc_b, after=ecc_a,
                        at_s=_first_at(ts, col.get("ecc_sbe", []),
                                       lambda v: v - base > rules.sbe_new_max),
                        **where))  # fmt: skip
    rb, ra = b.get("remapped_rows"), a.get("remapped_rows")
    if ra and (
        (ra.get("pending") and not (rb or {}).get("pending"))
        or (ra.get("failure") and not (rb or {}).get("failure"))
        or (ra.get("uncorrectable") or 0) > ((rb or {}).get("uncorrectable") or 0)
    ):
        found.append(_f("remap", "gpu", node, part,
                        f"{name} at {g.get('pci')}: remapped rows {rb} -> {ra}",
                        before=rb, after=ra, **where))  # fmt: skip
    pb, pa = b.get("retired_pages") or {}, a.get("retired_pages") or {}
    if pa.get("pending") and not pb.get("pending") or (pa.get("dbe") or 0) > (pb.get("dbe") or 0):
        found.append(_f("retired_pages", "gpu", node, part,
                        f"{name} at {g.get('pci')}: retired pages {pb} -> {pa}",
                        before=pb, after=pa, **where))  # fmt: skip
    rp_b, rp_a = b.get("pcie_replay"), a.get("pcie_replay")
    if rp_b is not None and rp_a is not None and rp_a - rp_b > rules.pcie_replay_new_max:
        found.append(_f("pcie_replay", "pcie", node, part,
                        f"{name} at {g.get('pci')}: PCIe replays {rp_b} -> {rp_a}",
                        before=rp_b, after=rp_a, **where))  # fmt: skip
    for link, ctr_a in (a.get("nvlink") or {}).items():
        ctr_b = (b.get("nvlink") or {}).get(link) or {}
        grew = {k: (ctr_b.get(k), v) for k, v in ctr_a.items()
                if v is not None and v - (ctr_b.get(k) or 0) > rules.nvlink_new_max}  # fmt: skip
        if grew:
            found.append(_f("nvlink", "nvlink", node, f"{part}/nvlink{link}",
                            f"{name} NVLink {link}: " + ", ".join(
                                f"{k} {x} -> {y}" for k, (x, y) in grew.items()),
                            before=ctr_b, after=ctr_a, **where))  # fmt: skip

    masks = [m for m in col.get("reasons", []) if m is not None]
    seen = [r for r, bit in REASONS.items() if any(m & bit for m in masks)]
    for r in HW_REASONS:
        if r in seen:
            found.append(_f(f"clocks.{r}", "gpu", node, part,
                            f"{name} at {g.get('pci')}: clocks-event reason {r} asserted",
                            at_s=_first_at(ts, col["reasons"], lambda m, bit=REASONS[r]: m & bit),
                            **where))  # fmt: skip
    for r in REPORTED_REASONS:
        if r in seen:
            share = sum(1 for m in masks if m & REASONS[r]) / len(masks)
            told.append({"node": node, "part": part, "what": r, "share": round(share, 3)})

    rates = col.get("gemm_tflops", [])
    first = window_rate(ts, rates, True, rules.window_s)
    last = window_rate(ts, rates, False, rules.window_s)
    if first and last is not None and last < rules.median_fraction * first:
        found.append(_f("gemm.sag", "gpu", node, part,
                        f"{name} at {g.get('pci')}: GEMM {last:.1f} TFLOP/s in the last"
                        f" {rules.window_s:g} s, {last / first:.2f}x its first {first:.1f}"
                        f" (rule: at least {rules.median_fraction:g}x)", before=first, after=last,
                        at_s=_first_at(ts, rates, lambda v: v < rules.median_fraction * first),
                        **where))  # fmt: skip

    for h in rec.get("hbm") or []:
        if h.get("gpu") == g["index"] and h.get("mismatched_bytes"):
            found.append(_f("hbm", "hbm", node, part,
                            f"{name} at {g.get('pci')}: HBM pattern {h['pattern']} mismatched"
                            f" {h['mismatched_bytes']} bytes of {h['bytes_tested']}, first at"
                            f" offset {h.get('first_offset')}", after=h,
                            at_s=round(h["t"] - rec["started"], 1), **where))  # fmt: skip
            break

    def stat(key: str, fn: Any) -> float | None:
        vals = [v for v in col.get(key, []) if v is not None]
        return fn(vals) if vals else None

    mine = [h for h in rec.get("hbm") or [] if h.get("gpu") == g["index"]]
    summary = {
        "node": node,
        **{k: g.get(k) for k in ("index", "serial", "pci", "name", "power_limit_w")},
        "power_max_w": stat("power_w", max),
        "temp_max_c": stat("temp_c", max),
        "sm_mhz_median": stat("sm_mhz", statistics.median),
        "first_tflops": first,
        "last_tflops": last,
        "reasons_seen": seen,
        "hbm_passes": len(mine),
        "hbm_fraction_of_free": min((h["fraction_of_free"] or 0) for h in mine) if mine else None,
    }
    return found, told, summary


# -- one node ---------------------------------------------------------------------------------
def judge_xids(node: str, rec: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Fatal XIDs during the run are findings (the GPU by its PCI address); others reported."""
    by_pci = {(g.get("pci") or "")[:10]: g for g in rec.get("gpus") or []}  # 0000:17:00
    found, told = [], []
    for x in rec.get("xids_new") or []:
        g = by_pci.get(x["pci"][:10])
        part = _part(g) if g else x["pci"]
        if x["xid"] in FATAL_XIDS:
            found.append(_f(f"xid.{x['xid']}", "xid", node, part,
                            f"XID {x['xid']} on {x['pci']}: {x['line']}", after=x["xid"],
                            at_s=x.get("t"), serial=g.get("serial") if g else None,
                            pci=g.get("pci") if g else x["pci"]))  # fmt: skip
        else:
            told.append({"node": node, "part": part, "what": f"xid {x['xid']}: {x['line']}"})
    return found, told


def judge_ports(node: str, rec: dict[str, Any]) -> list[dict[str, Any]]:
    """A port whose error counters grew, or that was not ACTIVE at some sample or at the end."""
    before = rec["counters"]["before"].get("ports") or {}
    after = rec["counters"]["after"].get("ports") or {}
    series = rec["series"].get("ports") or {}
    ts = rec["series"]["t"]
    found = []
    for port, a in after.items():
        b = before.get(port) or {}
        grew = {k: (b.get(k), a.get(k)) for k in PORT_COUNTERS
                if a.get(k) is not None and a[k] > (b.get(k) or 0)}  # fmt: skip
        states = [s for s in (series.get(port) or {}).get("state", []) if s is not None]
        down = [s for s in [b.get("state"), *states, a.get("state")] if s and s != "ACTIVE"]
        if not grew and not down:
            continue
        what = ", ".join(f"{k} {x} -> {y}" for k, (x, y) in grew.items())
        if down:
            what = (what + "; " if what else "") + f"state {down[0]}"
        first = None
        for k in grew:
            col = (series.get(port) or {}).get(k, [])
            lim = b.get(k) or 0
            t = _first_at(ts, col, lambda v, lim=lim: v > lim)
            first = t if first is None or (t is not None and t < first) else first
        found.append(_f("port", "port", node, port, f"port {port}: {what}",
                        before=b, after=a, at_s=first))  # fmt: skip
    return found


def judge_nodes(
    records: dict[str, dict[str, Any]], rules: Rules
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """(findings, reported, per-GPU summaries, unmeasured) over every node's record; a node
    that returned no record is a finding of its own (a watch that did not run is no pass)."""
    found: list[dict[str, Any]] = []
    told: list[dict[str, Any]] = []
    gpus: list[dict[str, Any]] = []
    unmeasured: list[str] = []
    for node, rec in records.items():
        if rec.get("error") and "series" not in rec:
            found.append(_f("node", "node", node, node, f"the burn-in did not run: {rec['error']}"))
            continue
        for e in rec.get("errors") or []:
            found.append(_f("load", "gpu", node, e.split(":")[0], f"the load stopped: {e}"))
        for g in rec.get("gpus") or []:
            f, t, s = judge_gpu(node, g, rec, rules)
            found += f
            told += t
            gpus.append(s)
        f, t = judge_xids(node, rec)
        found += f
        told += t
        found += judge_ports(node, rec)
        if rec["counters"]["after"].get("xids") is None:
            unmeasured.append(f"{node}: kernel log unreadable, XIDs not read")
        if rec.get("device") == "cuda" and not rec.get("nvml"):
            unmeasured.append(f"{node}: NVML unavailable, clocks, power and counters not read")
    found += rack_median(gpus, rules)
    return found, told, gpus, unmeasured


def rack_median(gpus: list[dict[str, Any]], rules: Rules) -> list[dict[str, Any]]:
    """A GPU whose last-window GEMM rate is below median_fraction x the rack's median."""
    lasts = [g["last_tflops"] for g in gpus if g.get("last_tflops")]
    if len(lasts) < 3:  # a median of one or two GPUs is themselves
        return []
    med = statistics.median(lasts)
    return [
        _f("gemm.rack", "gpu", g["node"], g.get("serial") or f"GPU{g['index']}",
           f"GPU{g['index']} at {g.get('pci')}: GEMM {g['last_tflops']:.1f} TFLOP/s,"
           f" {g['last_tflops'] / med:.2f}x the rack median {med:.1f}", before=med,
           after=g["last_tflops"], serial=g.get("serial"), pci=g.get("pci"))
        for g in gpus
        if g.get("last_tflops") and g["last_tflops"] < rules.median_fraction * med
    ]  # fmt: skip


def cpu_only(loop: dict[str, Any]) -> bool:
    """A node's own allreduce loop whose ranks ran on CPUs (Gloo)."""
    return len(loop["nodes"]) == 1 and loop.get("backend") == "gloo"


def judge_loops(
    loops: list[dict[str, Any]],
    rules: Rules,
    busy: list[tuple[float, float]] = (),  # type: ignore[assignment]
) -> list[dict[str, Any]]:
    """An allreduce interval below median_fraction x its loop's median, or a loop that failed.
    Intervals that overlap a pair round (`busy`, wall-clock windows: the rounds share the
    links on purpose) are recorded, marked in `excluded`, and not judged. A node's own loop
    on Gloo (a node without GPUs: its ranks are CPU processes sharing the node's cores, on the
    lab this machine's) is recorded and not judged, as the CPU GEMM is (`judge_cpu_rate`):
    seen on a busy lab (load 8-11 on two cores), two of a clean node's 35 intervals below
    0.7x of its median (the first 0.63x) named the node."""
    found = []
    for lp in loops:
        nodes = lp["nodes"]
        where = nodes[0] if len(nodes) == 1 else "rack"
        if lp.get("error"):
            found.append(_f("allreduce", "allreduce", where, lp["name"],
                            f"allreduce loop failed: {lp['error']}"))  # fmt: skip
            continue
        if cpu_only(lp) and not rules.judge_cpu_rate:
            continue
        vals = lp.get("busbw_gb_s") or []
        starts = lp.get("starts") or []
        width = lp["interval_s"]
        lp["excluded"] = [
            i for i, s in enumerate(starts)
            if any(s < b and s + 2 * width > a for a, b in busy)  # an interval may run long
        ]  # fmt: skip
        judged = [(i, v) for i, v in enumerate(vals) if i not in lp["excluded"]]
        if len(judged) < 3:
            continue
        med = statistics.median(v for _, v in judged)
        low = [(i, v) for i, v in judged if v < rules.median_fraction * med]
        if low:
            i, v = low[0]
            found.append(_f("allreduce", "allreduce", where, lp["name"],
                            f"{len(low)} interval(s) below {rules.median_fraction:g}x the loop's"
                            f" median {med:.4g} GB/s; first at {i * width:g} s:"
                            f" {v:.4g} GB/s", before=med, after=v,
                            at_s=i * width))  # fmt: skip
    return found
