#!/usr/bin/env bash
# The ResNet50 variants of docs/evidence/h200-variants-2.txt: rackcert's worker alone, one fresh
# process per variant, the compile cache the certification run uses (kept between variants).
# Usage: bash docs/evidence/h200-variants-2.sh > variants.log
set -uo pipefail
# The ResNet options these variants set are declared in validation/bench/units/resnet.py; a
# launch passes their declarations to the worker as data (validation/bench/node/declare.py).
DECLARED='[["compile_mode","str",[]],["compile_optimizer","bool",[]],["batch","int",[]]]'
CACHE=$(python3 -c 'import sys; from validation.bench.node.compilecache import default_dir
print(default_dir(sys.prefix))')
run() {  # name, worker arguments...
  local name=$1; shift
  timeout 300 python3 -m torch.distributed.run --standalone --nproc-per-node 1 \
    -m validation.bench.node.worker --tasks resnet --device cuda --compile-cache "$CACHE" --declared "$DECLARED" "$@" \
    2>&1 | grep RACKCERT_RESULT | sed "s/^.*RACKCERT_RESULT /$name /"
}
run default
run graphs --compile-mode reduce-overhead
run fused-sgd --no-compile-optimizer
run no-cudnn-bench --no-cudnn-benchmark
run b384 --batch 384
run b512 --batch 512
run max-autotune --compile-mode max-autotune-no-cudagraphs
