#!/usr/bin/env bash
# How docs/evidence/h200-bench.json was made on one H200: rackcert's default bench (bf16
# autocast, channels_last, cudnn.benchmark, torch.compile with CUDA graphs and the
# optimizer step compiled, no DDP wrapper at one rank), with the naive loop and the two
# reference loops (plain compiled fp16 loop; Horovod's synthetic-benchmark defaults) timed
# in the same process, NCCL allreduce sweep 8 B..1 GiB, storage random reads on synthetic
# files; then the default at batch 384 (ResNet50 only).
# Usage: OUT=/some/dir bash docs/evidence/h200-bench.sh
set -uo pipefail
OUT=${OUT:-/tmp/h200-out}
mkdir -p "$OUT" /tmp/rackcert-data
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/nvidia-smi.txt"
python3 -m rackcert.cli bench inventories/r750xa-4node.yaml --local --runs-dir /tmp/runs-default \
  --storage-dir /tmp/rackcert-data --synthetic-data 2>&1 | tee "$OUT/bench-default.log"
cp /tmp/runs-default/*/*/bench.json "$OUT/h200-bench.json"
cat /tmp/runs-default/*/*/artifacts/bench/launch-*.log > "$OUT/launch-default.log"
python3 -m rackcert.cli bench inventories/r750xa-4node.yaml --local --runs-dir /tmp/runs-b384 \
  --batch 384 --no-naive --no-references --skip allreduce,storage 2>&1 | tee "$OUT/bench-b384.log"
cp /tmp/runs-b384/*/*/bench.json "$OUT/h200-bench-b384.json"
