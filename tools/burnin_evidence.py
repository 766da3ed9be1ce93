"""A text summary of one node's burn-in record (and the sampler's cost), judged by rackcert's rules.

Why: the evidence of a GPU burn-in is the node's record (validation/bench/node/burnin.py's
JSON) read by the same judge `rackcert burnin` uses; this prints what an auditor checks: the
power cap reached and the SW power-cap reason, the counters before and after, the GEMM rate
over the run, the HBM passes, the findings, and the sampler's cost beside a plain loop.

Usage: .venv/bin/python tools/burnin_evidence.py burnin-node.json [sampler-cost.jsonl]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from validation.bench.burnin.judge import Rules, judge_nodes, window_rate
from validation.bench.node.burnin import REASONS


def _vals(col: list[Any]) -> list[float]:
    return [v for v in col if isinstance(v, int | float)]


def summary(rec: dict[str, Any], cost: dict[str, Any] | None) -> list[str]:
    found, told, gpus, unmeasured = judge_nodes({rec["node"]: rec}, Rules())
    ts = rec["series"]["t"]
    out = [
        f"device {rec['device']}, driver {rec.get('driver')}, torch {rec.get('torch')}",
        f"duration {rec['duration_s']:.0f} s, {len(ts)} samples at {rec['interval_s']:g} s",
    ]
    for g in rec["gpus"]:
        i = str(g["index"])
        col = rec["series"]["gpus"][i]
        power, sm, temp = _vals(col["power_w"]), _vals(col["sm_mhz"]), _vals(col["temp_c"])
        masks = [m for m in col["reasons"] if m is not None]
        at_cap = sum(1 for p in power if p >= 0.97 * (g.get("power_limit_w") or 1e9))
        out.append(
            f"GPU{i} {g.get('name')} PCI {g.get('pci')} power limit {g.get('power_limit_w')} W"
        )
        out.append(
            f"  power: max {max(power):.1f} W, median {statistics.median(power):.1f} W;"
            f" samples >= 97 % of the limit: {at_cap}/{len(power)}"
        )
        out.append(
            f"  SM clock: median {statistics.median(sm):.0f} MHz (min {min(sm)}, max {max(sm)});"
            f" temperature max {max(temp)} C"
        )
        shares = {r: sum(1 for m in masks if m & bit) / len(masks) for r, bit in REASONS.items()}
        out.append(
            "  clocks-event reasons, share of samples: "
            + ", ".join(f"{r} {s:.0%}" for r, s in shares.items() if s)
        )
        rates = col["gemm_tflops"]
        first = window_rate(ts, rates, True, 60.0)
        last = window_rate(ts, rates, False, 60.0)
        per_min = []
        for m in range(int(ts[-1] // 60) + 1):
            sel = [
                r
                for t, r in zip(ts, rates, strict=False)
                if r is not None and m * 60 <= t < (m + 1) * 60
            ]
            per_min.append(f"{statistics.median(sel):.0f}" if sel else "-")
        out.append(
            f"  GEMM TFLOP/s: first 60 s {first:.1f}, last 60 s {last:.1f} ({last / first:.3f}x)"
        )
        out.append(f"  GEMM TFLOP/s per minute (median): {' '.join(per_min)}")
        for h in [h for h in rec["hbm"] if h["gpu"] == g["index"]][:3]:
            out.append(
                f"  HBM pass {h['pattern']}: {h['bytes_tested'] / 2**30:.1f} GiB"
                f" ({h['fraction_of_free']:.1%} of free), mismatched {h['mismatched_bytes']} B,"
                f" {h['wall_s']:.2f} s"
            )
        n_hbm = sum(1 for h in rec["hbm"] if h["gpu"] == g["index"])
        out.append(f"  HBM passes in all: {n_hbm}")
        for when in ("before", "after"):
            c = rec["counters"][when]["gpus"].get(i, {})
            out.append(
                f"  counters {when}: ecc {c.get('ecc')}, remapped rows {c.get('remapped_rows')},"
                f" retired pages {c.get('retired_pages')}, pcie replay {c.get('pcie_replay')},"
                f" nvlink {c.get('nvlink') or 'none active'}"
            )
    for when in ("before", "after"):
        x = rec["counters"][when].get("xids")
        out.append(f"kernel log {when}: {'unreadable' if x is None else f'{len(x)} XID line(s)'}")
    out.append(f"IB/RoCE ports: {sorted(rec['counters']['after']['ports']) or 'none'}")
    out.append(f"new XIDs during the run: {rec['xids_new'] or 'none'}")
    out.append(f"load errors: {rec['errors'] or 'none'}")
    out.append(f"findings: {[f['message'] for f in found] or 'none'}")
    out += [f"reported: {t['part']} {t['what']} ({t.get('share')})" for t in told]
    out += [f"not measured: {u}" for u in unmeasured]
    if cost is not None:
        out.append(
            f"sampler cost: GEMM {cost['off_tflops']} TFLOP/s a GPU without the sampler,"
            f" {cost['on_tflops']} with it at 1 s: {cost['cost_percent']} %"
            f" ({cost['rounds']} off/on pairs of {cost['block_s']:g} s blocks)"
        )
        out += [f"  block: {json.dumps(b)}" for b in cost["blocks"]]
    return out


def main() -> int:
    rec = json.loads(Path(sys.argv[1]).read_text())
    cost = None
    if len(sys.argv) > 2:
        lines = [ln for ln in Path(sys.argv[2]).read_text().splitlines() if ln.startswith("{")]
        cost = next((json.loads(ln) for ln in reversed(lines) if "cost_percent" in ln), None)
    print("\n".join(summary(rec, cost)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
