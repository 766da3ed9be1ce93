#!/usr/bin/env bash
# The certification run on one GPU node, beside each configuration alone, in one go:
#  1. `rackcert bench --local` with an empty compile cache (the first certification: every
#     configuration compiles), nccl-tests beside the sweep when its binary is given;
#  2. each configuration the run reports, alone: rackcert's worker in a fresh torchrun
#     process of its own, straight from the shell (no rackcert around it);
#  3. `rackcert bench --local` again (the re-certification: the cache under the DL
#     environment is warm), ResNet50 loops only;
#  4. the side-by-side table: each configuration in run 1, in run 2 and alone, the
#     difference, the precision and batch it was judged at, and the warm-up of both runs.
# Needs rackcert's own Python dependencies beside the node's torch (pydantic, ruamel.yaml,
# jsonschema, and typer 0.29.2 with click 8.5.1: the CUDA image's own typer/click pair
# stopped `rackcert bench` at option parsing on an H200 machine).
# Usage: OUT=/some/dir bash docs/evidence/h200-bench.sh [ALL_REDUCE_PERF]
set -uo pipefail
OUT=${OUT:-/tmp/h200-out}
NCCL_TESTS=${1:-}
SPEC=inventories/r750xa-4node.yaml
mkdir -p "$OUT" /tmp/rackcert-data
CACHE=$(python3 -c 'import sys; from validation.bench.compilecache import default_dir
print(default_dir(sys.prefix))')
rm -rf "$CACHE" /tmp/runs-cold /tmp/runs-warm  # run 1 starts with nothing compiled
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import torch, torchvision; print("torch", torch.__version__, "CUDA",
    torch.version.cuda, "cuDNN", torch.backends.cudnn.version(), "NCCL",
    ".".join(map(str, torch.cuda.nccl.version())), "torchvision", torchvision.__version__)'
  echo "compile cache: $CACHE"
} | tee "$OUT/versions.txt"

bench() {  # name, extra bench arguments...
  local name=$1; shift
  local t0=$SECONDS
  python3 -m rackcert.cli bench "$SPEC" --local --runs-dir "/tmp/runs-$name" --json "$@" \
    >"$OUT/bench-$name.json" 2>"$OUT/bench-$name.err"
  echo "bench $name: exit $? (1 = INCOMPLETE on one GPU), $((SECONDS - t0)) s" | tee -a "$OUT/times.txt"
}
alone() {  # task, worker arguments...
  local task=$1; shift
  local t0=$SECONDS
  python3 -m torch.distributed.run --standalone --nproc-per-node 1 -m validation.bench.worker \
    --device cuda --tasks "$task" --compile-cache "$CACHE" "$@" >"$OUT/alone-$task.log" 2>&1
  echo "alone $task: exit $?, $((SECONDS - t0)) s" | tee -a "$OUT/times.txt"
}

extra=()
[ -n "$NCCL_TESTS" ] && extra=(--nccl-tests "$NCCL_TESTS")
bench cold --storage-dir /tmp/rackcert-data --synthetic-data "${extra[@]}"
for task in resnet naive plain horovod_ref; do alone "$task"; done
bench warm --skip allreduce,storage --no-naive

python3 - "$OUT" <<'PY' | tee "$OUT/side-by-side.txt"
import json, sys
from pathlib import Path
from validation.bench.launch import parse_result
out = Path(sys.argv[1])
def runs(name):
    try:
        data = json.loads((out / f"bench-{name}.json").read_text())
    except (OSError, ValueError):
        return {}
    return {t: ln[t] for ln in data["launches"] for t in ln["tasks"] if ln.get(t)}
cold, warm = runs("cold"), runs("warm")
print(f"{'configuration':<12} {'precision':>9} {'batch':>5} {'run 1':>9} {'run 2':>9} {'alone':>9}"
      f" {'1/alone':>8} {'2/alone':>8} {'warm-up 1':>9} {'warm-up 2':>9} {'alone':>6}")
for task in ("resnet", "naive", "plain", "horovod_ref"):
    log = out / f"alone-{task}.log"
    one = parse_result(log.read_text()) if log.exists() else None
    a = (one or {}).get(task)
    c, w = cold.get(task), warm.get(task)
    ref = c or w or a
    if ref is None:
        print(f"{task:<12} not measured")
        continue
    def ips(r):
        return f"{r['images_per_sec']:9,.1f}" if r else f"{'-':>9}"
    def pct(r):
        return f"{100 * (r['images_per_sec'] / a['images_per_sec'] - 1):+7.2f}%" if r and a else f"{'-':>8}"
    def wu(r):
        return f"{r['warmup_s']:8.1f}s" if r else f"{'-':>9}"
    cfg = ref["config"]
    print(f"{task:<12} {cfg['precision']:>9} {cfg['batch']:>5} {ips(c)} {ips(w)} {ips(a)} {pct(c)}"
          f" {pct(w)} {wu(c)} {wu(w)} {wu(a)[:-1]:>5}s")
    for label, r in (("run 1", c), ("run 2", w), ("alone", a)):
        if r:
            d = r.get("device_after") or {}
            print(f"    {label}: spread {r['spread']:.1f}, intervals"
                  f" {[round(x) for x in r['interval_totals']]}, SM {d.get('sm_clock_mhz')} MHz,"
                  f" {d.get('temperature_c')} C, {d.get('power_w')} W,"
                  f" reserved before {(r.get('device_before') or {}).get('memory_reserved_gib', 0):.1f} GiB")
PY
