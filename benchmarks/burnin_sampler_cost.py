"""What the burn-in's sampler costs the load it watches: GEMM rate with and without it.

Why: a watch that slows the GPUs it judges would judge its own cost (the rule allows 1 %).
The same GEMM load (validation/bench/node/burnin.py's GEMM phase, bf16 n=8192 on every GPU)
runs in blocks of `--block` seconds, the sampler off and on in turn (off, on, off, on, ...,
after a warm-up that brings the GPU to its power cap), so a slow drift of clocks or
temperature falls on both sides. Each block's rate is its flops over its wall time (what the
sampler's reads and its thread's share of the interpreter would take); the cost is
1 - mean(on) / mean(off).

    python3 benchmarks/burnin_sampler_cost.py --block 45 --rounds 2 --warmup 20
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

NODE = Path(__file__).resolve().parent.parent / "validation" / "bench" / "node" / "burnin.py"


def node_module() -> Any:
    spec = importlib.util.spec_from_file_location("burnin_node", NODE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["burnin_node"] = mod
    spec.loader.exec_module(mod)
    return mod


def block(node: Any, torch: Any, gpus: int, seconds: float, sampler: bool, nvml: Any) -> float:
    """One block of GEMM load on every GPU; TFLOP/s per GPU over the block's wall time."""
    plan = node.Plan(deadline=time.monotonic() + seconds, hbm_s=0.0, gemm_s=seconds + 1)
    rates = [node.Rates() for _ in range(gpus)]
    errors: list[str] = []
    threads = [
        threading.Thread(target=node.gpu_load, args=(torch, g, plan, rates[g], [], errors))
        for g in range(gpus)
    ]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    if sampler:
        watch = node.Watch(nvml, node.gpu_handles(nvml, gpus), rates, 1.0, "/", None, 30.0)
        watch.run(plan.over, time.time())
    for t in threads:
        t.join()
    if errors:
        raise SystemExit(f"load failed: {errors[0]}")
    wall = max(max(end for end, _, _ in r.done) - t0 for r in rates)
    return sum(sum(f for _, _, f in r.done) for r in rates) / wall / gpus / 1e12


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--block", type=float, default=45.0, help="seconds per block")
    p.add_argument("--rounds", type=int, default=2, help="off/on pairs")
    p.add_argument("--warmup", type=float, default=20.0, help="seconds of load first")
    args = p.parse_args()
    import torch

    node = node_module()
    gpus = torch.cuda.device_count()
    if not gpus:
        raise SystemExit("no GPU: the sampler's cost is measured against a GPU's GEMM rate")
    nvml = node.load_nvml()
    if nvml is None:
        raise SystemExit("no NVML: the sampler would read nothing")
    block(node, torch, gpus, args.warmup, False, nvml)
    rows: list[dict[str, Any]] = []
    for r in range(args.rounds):
        for sampler in (False, True):
            rate = block(node, torch, gpus, args.block, sampler, nvml)
            rows.append({"round": r, "sampler": sampler, "tflops_per_gpu": round(rate, 2)})
            print(json.dumps(rows[-1]), flush=True)
    off = statistics.mean(x["tflops_per_gpu"] for x in rows if not x["sampler"])
    on = statistics.mean(x["tflops_per_gpu"] for x in rows if x["sampler"])
    out = {
        "gpus": gpus,
        "gpu": torch.cuda.get_device_name(0),
        "block_s": args.block,
        "rounds": args.rounds,
        "off_tflops": round(off, 2),
        "on_tflops": round(on, 2),
        "cost_percent": round(100 * (1 - on / off), 2),
        "blocks": rows,
    }
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
