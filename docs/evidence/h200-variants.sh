#!/usr/bin/env bash
# ResNet50 training variants on one H200, each through rackcert's own worker (one torchrun
# process, NCCL, synthetic data on the GPU, 20 warm-up steps excluded, 5 x 10 timed steps):
# what each of the bench issue's candidate changes is worth before one is made the default.
# Usage: OUT=/some/dir bash docs/evidence/h200-variants.sh [SECONDS_PER_VARIANT]
set -uo pipefail
OUT=${OUT:-/tmp/h200-variants}
LIMIT=${1:-170}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c 'import torch, torchvision; print(torch.__version__, torch.version.cuda,
  torch.backends.cudnn.version(), torch.cuda.nccl.version(), torchvision.__version__)' \
  | tee -a "$OUT/gpu.txt"
variant() {  # name, worker args...
  local name=$1; shift
  local t0=$SECONDS
  timeout "$LIMIT" python3 -m torch.distributed.run --standalone --nproc-per-node 1 \
    -m validation.bench.worker --device cuda "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  python3 - "$name" "$rc" "$((SECONDS - t0))" "$OUT/$name.log" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
name, rc, wall, log = sys.argv[1:]
line = next((ln for ln in reversed(open(log).read().splitlines()) if "RACKCERT_RESULT " in ln), None)
if line is None:
    print(f"{name}: rc {rc}, {wall}s, no result")
    sys.exit()
r = json.loads(line.split("RACKCERT_RESULT ", 1)[1])
for task in ("resnet", "plain", "horovod_ref", "naive"):
    if task in r:
        x = r[task]
        c = x["config"]
        print(f"{name}/{task}: {x['images_per_sec']:.1f} +- {x['spread']:.1f} img/s"
              f" (batch {c['batch']} {c['precision']} compiled={c['compiled']}"
              f" mode={c.get('compile_mode')} opt={c.get('compile_optimizer')}"
              f" dp={c.get('data_parallel')} warm {x['warmup_s']:.0f}s"
              f" finite={x['loss_finite']} err={x['compile_error']})")
print(f"{name}: rc {rc}, {wall}s")
PY
}
variant default-and-refs --tasks resnet,plain,horovod_ref
variant bf16 --tasks resnet --precision bf16
variant bf16-optc --tasks resnet --precision bf16 --compile-optimizer
variant fp16-graphs --tasks resnet --compile-mode reduce-overhead
variant bf16-graphs-optc --tasks resnet --precision bf16 --compile-mode reduce-overhead --compile-optimizer
variant fp16-b384 --tasks resnet --batch 384
variant bf16-b384-optc --tasks resnet --precision bf16 --batch 384 --compile-optimizer
