#!/usr/bin/env bash
# ResNet50 training variants on one GPU, each through rackcert's own worker in a fresh
# torchrun process (NCCL, synthetic data on the GPU, 20 warm-up steps excluded, 5 x 20
# timed steps): what each knob is worth against the default (bf16 autocast, channels_last,
# cudnn.benchmark, torch.compile mode reduce-overhead = CUDA graphs, optimizer step compiled,
# batch 256). Then the former certification run's shape: sweep, default and plain loop in
# ONE process, to show what running them together cost.
# Usage: OUT=/some/dir bash docs/evidence/h200-variants.sh [SECONDS_IN_ALL]
set -uo pipefail
OUT=${OUT:-/tmp/h200-variants}
BUDGET=${1:-560}
mkdir -p "$OUT"
# The ResNet options these variants set are declared in validation/bench/units/resnet.py; a
# launch passes their declarations to the worker as data (validation/bench/node/declare.py).
DECLARED='[["compile_mode","str",[]],["compile_optimizer","bool",[]],["batch","int",[]]]'
CACHE=$(python3 -c 'import sys; from validation.bench.node.compilecache import default_dir
print(default_dir(sys.prefix))')
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c 'import torch, torchvision; print(torch.__version__, torch.version.cuda,
  torch.backends.cudnn.version(), torch.cuda.nccl.version(), torchvision.__version__)' \
  | tee -a "$OUT/gpu.txt"
variant() {  # name, seconds at most, worker args...
  local name=$1 limit=$2; shift 2
  local left=$((BUDGET - SECONDS))
  [ "$left" -lt 30 ] && { echo "$name: not run (budget spent)" | tee -a "$OUT/summary.txt"; return; }
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$SECONDS
  timeout "$limit" python3 -m torch.distributed.run --standalone --nproc-per-node 1 \
    -m validation.bench.node.worker --device cuda --compile-cache "$CACHE" --declared "$DECLARED" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  python3 - "$name" "$rc" "$((SECONDS - t0))" "$OUT/$name.log" <<'PY' | tee -a "$OUT/summary.txt"
import sys
from validation.bench.launch import parse_result
name, rc, wall, log = sys.argv[1:]
r = parse_result(open(log).read())
if r is None:
    print(f"{name}: rc {rc}, {wall}s, no result{' (timed out)' if rc == '124' else ''}")
    sys.exit()
for task in ("resnet", "plain", "horovod_ref", "naive"):
    if task in r:
        x = r[task]
        c = x["config"]
        d = x.get("device_after") or {}
        print(f"{name}/{task}: {x['images_per_sec']:.1f} +- {x['spread']:.1f} img/s"
              f" (batch {c['batch']} {c['precision']} channels_last={c['channels_last']}"
              f" cudnn.benchmark={c['cudnn_benchmark']} mode={c.get('compile_mode_used')}"
              f" graphs={c.get('cuda_graphs')} opt_compiled={c.get('optimizer_compiled')}"
              f" warm {x['warmup_s']:.0f}s SM {d.get('sm_clock_mhz')} MHz"
              f" finite={x['loss_finite']} err={x['compile_error']})")
print(f"{name}: rc {rc}, {wall}s")
PY
}
variant default 200 --tasks resnet
variant no-graphs 200 --tasks resnet --compile-mode default
variant opt-fused 200 --tasks resnet --no-compile-optimizer
variant no-cudnn-benchmark 200 --tasks resnet --no-cudnn-benchmark
variant b384 200 --tasks resnet --batch 384
variant b512 200 --tasks resnet --batch 512
variant nchw 200 --tasks resnet --no-channels-last
variant one-process 200 --tasks allreduce,resnet,plain
variant max-autotune 400 --tasks resnet --compile-mode max-autotune
