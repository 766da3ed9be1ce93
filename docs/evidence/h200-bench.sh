#!/usr/bin/env bash
# The certification run on one GPU node beside each configuration alone, in one go:
#  1. `rackcert bench --local` with an empty compile cache (the first certification: every
#     configuration compiles): the default ResNet50 loop and the two reference loops, each
#     in its own process (the bench's own rule);
#  2. each of those configurations alone: the very worker command bench.json recorded for
#     it, started again from the shell in a fresh process (no rackcert around it), with the
#     cache run 1 left;
#  3. `rackcert bench --local` again (the re-certification: the cache is warm);
#  4. the side-by-side table: each configuration in run 1, in run 2 and alone, the
#     differences, the precision and batch it was judged at, the warm-up of each and how
#     the compile cache answered, the board's SM clock and power under load; then the
#     board as nvidia-smi saw it every half second while the GPU was busy.
# Needs rackcert's own Python dependencies beside the node's torch (pydantic, ruamel.yaml,
# jsonschema, and typer 0.29.2 with click 8.5.1: the CUDA image's own typer/click pair
# stopped `rackcert bench` at option parsing on an H200 machine).
# Usage: OUT=/some/dir bash docs/evidence/h200-bench.sh [SPEC]
set -uo pipefail
OUT=${OUT:-/tmp/h200-out}
SPEC=${1:-inventories/h200-local.yaml}
mkdir -p "$OUT"
CACHE=$(python3 -c 'import sys; from validation.bench.node.compilecache import default_dir
print(default_dir(sys.prefix))')
rm -rf "$CACHE" /tmp/runs-1 /tmp/runs-2  # run 1 starts with nothing compiled
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,clocks.max.sm --format=csv,noheader
  python3 -c 'import torch, torchvision; print("torch", torch.__version__, "CUDA",
    torch.version.cuda, "cuDNN", torch.backends.cudnn.version(), "NCCL",
    ".".join(map(str, torch.cuda.nccl.version())), "torchvision", torchvision.__version__)'
} | tee "$OUT/versions.txt"

# The board every half second: power against its limit, the SM clock against its top, and
# why the clock is held down (clocks_event_reasons: 0x4 = software power cap).
Q=timestamp,utilization.gpu,power.draw,power.limit,clocks.sm,clocks.max.sm,temperature.gpu
nvidia-smi --query-gpu=$Q,clocks_event_reasons.active --format=csv,noheader >/dev/null 2>&1 &&
  Q=$Q,clocks_event_reasons.active
echo "$Q" >"$OUT/smi.csv"
nvidia-smi --query-gpu=$Q --format=csv,noheader -lms 500 >>"$OUT/smi.csv" 2>/dev/null &
SAMPLER=$!
trap 'kill $SAMPLER 2>/dev/null' EXIT

bench() {  # run number: the certification run (no sweep or storage on one GPU)
  local t0=$SECONDS
  python3 -m rackcert.cli bench "$SPEC" --local --runs-dir "/tmp/runs-$1" --json \
    --skip allreduce,storage,rdma --no-naive >"$OUT/bench-$1.json" 2>"$OUT/bench-$1.err"
  echo "bench run $1: exit $? (1 = INCOMPLETE: one GPU, nothing to judge scaling by), $((SECONDS - t0)) s" |
    tee -a "$OUT/times.txt"
}
alone() {  # task: the worker command run 1 recorded for it, from the shell
  local t0=$SECONDS
  mapfile -t cmd < <(python3 - "$OUT/bench-1.json" "$1" <<'PY'
import json, sys
data = json.loads(open(sys.argv[1]).read())
print("\n".join(next(ln["commands"][0] for ln in data["launches"] if sys.argv[2] in ln["tasks"])))
PY
  )
  [ ${#cmd[@]} -gt 0 ] || { echo "alone $1: run 1 recorded no launch" | tee -a "$OUT/times.txt"; return; }
  "${cmd[@]}" >"$OUT/alone-$1.log" 2>&1
  echo "alone $1: exit $?, $((SECONDS - t0)) s" | tee -a "$OUT/times.txt"
}

bench 1
for task in resnet plain; do alone "$task"; done  # Horovod's loop: runs 1 and 2 only (its 51,200 timed images take 36 s)
bench 2
kill $SAMPLER 2>/dev/null

python3 - "$OUT" <<'PY' | tee "$OUT/side-by-side.txt"
import csv, json, statistics, sys
from pathlib import Path
from validation.bench.launch import parse_result
out = Path(sys.argv[1])
def runs(n):
    try:
        data = json.loads((out / f"bench-{n}.json").read_text())
    except (OSError, ValueError):
        return {}
    return {t: ln[t] for ln in data["launches"] for t in ln["tasks"] if ln.get(t)}
one, two = runs(1), runs(2)
def ips(r): return f"{r['images_per_sec']:9,.1f}" if r else f"{'-':>9}"
def pct(r, a): return f"{100 * (r['images_per_sec'] / a['images_per_sec'] - 1):+7.2f}%" if r and a else f"{'-':>8}"
def wu(r): return f"{r['warmup_s']:6.1f}s" if r else f"{'-':>7}"
print("images/s = median of the timed windows; warm-up = steps until compiled and autotuned")
print(f"{'configuration':<12} {'precision':>9} {'batch':>5} {'run 1':>9} {'run 2':>9} {'alone':>9}"
      f" {'1/alone':>8} {'2/alone':>8} {'warm-up 1':>9} {'2':>7} {'alone':>7}")
for task in ("resnet", "plain", "horovod_ref"):
    log = out / f"alone-{task}.log"
    a = (parse_result(log.read_text()) or {}).get(task) if log.exists() else None
    c, w = one.get(task), two.get(task)
    ref = c or w or a
    if ref is None:
        print(f"{task:<12} not measured")
        continue
    cfg = ref["config"]
    print(f"{task:<12} {cfg['precision']:>9} {cfg['batch']:>5} {ips(c)} {ips(w)} {ips(a)} {pct(c, a)}"
          f" {pct(w, a)}  {wu(c)} {wu(w)} {wu(a)}")
    for label, r in (("run 1", c), ("run 2", w), ("alone", a)):
        if r:
            load = r.get("under_load") or {}
            clock, power = load.get("sm_clock_mhz") or {}, load.get("power_w") or {}
            print(f"    {label}: windows {[round(x) for x in r['interval_totals']]} +-{r['spread']:.1f};"
                  f" cache {r.get('compile_cache')}; under load SM {clock.get('median')} MHz"
                  f" ({clock.get('min')}-{clock.get('max')}), {power.get('median', 0):.0f} W")
rows = list(csv.reader((out / "smi.csv").open(), skipinitialspace=True))
head, busy = rows[0], [r for r in rows[1:] if len(r) == len(rows[0]) and r[1].split()[0].isdigit() and int(r[1].split()[0]) >= 90]
if busy:
    col = {k: i for i, k in enumerate(head)}
    num = lambda r, k: float(r[col[k]].split()[0])
    pw = [num(r, "power.draw") for r in busy]
    sm = [num(r, "clocks.sm") for r in busy]
    print(f"nvidia-smi, {len(busy)} samples at >= 90% utilisation: power {statistics.median(pw):.0f} W"
          f" median ({min(pw):.0f}-{max(pw):.0f}) of a {num(busy[0], 'power.limit'):.0f} W limit;"
          f" SM clock {statistics.median(sm):.0f} MHz median ({min(sm):.0f}-{max(sm):.0f})"
          f" of {num(busy[0], 'clocks.max.sm'):.0f} MHz")
    if "clocks_event_reasons.active" in col:
        capped = sum(1 for r in busy if int(r[col["clocks_event_reasons.active"]], 16) & 0x4)
        print(f"software power cap holding the clock in {capped} of {len(busy)} busy samples")
PY
