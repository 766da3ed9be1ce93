#!/usr/bin/env bash
# The metrics issue's evidence on one H200: the health check, validate and bench, each with
# --metrics-textfile, and validate a second time after the first run is certified (so its
# drift comparison runs against a real baseline: expect 0 drift items).
# Needs rackcert's Python dependencies beside the node's torch, as h200-bench.sh says, plus
# prometheus_client (pyproject dependency). promtool is not needed on the GPU machine: lint
# the files where they are committed, `for f in docs/evidence/h200-metrics/*.prom; do
# promtool check metrics <"$f" || echo "$f"; done`.
# Usage: OUT=/some/dir bash docs/evidence/h200-metrics.sh [SPEC]
# Then copy $OUT/* to docs/evidence/h200-metrics/.
set -uo pipefail
OUT=${OUT:-/tmp/h200-metrics}
SPEC=${1:-inventories/h200-local.yaml}
RUNS=/tmp/runs-metrics
mkdir -p "$OUT"
rm -rf "$RUNS"
rc() { echo "$1: exit $2, $3 s" | tee -a "$OUT/times.txt"; }

t0=$SECONDS
python3 -m rackcert.cli validate "$SPEC" --health-check --node h200-node1 \
  --health-record "$OUT/health-check.jsonl" --metrics-textfile "$OUT/h200-health-check.prom" \
  >"$OUT/health-check.txt" 2>&1
rc "health check" $? $((SECONDS - t0))

t0=$SECONDS
python3 -m rackcert.cli validate "$SPEC" --local --runs-dir "$RUNS" \
  --metrics-textfile "$OUT/h200-validate.prom" >"$OUT/validate-1.txt" 2>&1
rc "validate 1" $? $((SECONDS - t0))

t0=$SECONDS  # the certification run's bench: ResNet50 on the one GPU (no sweep or storage)
python3 -m rackcert.cli bench "$SPEC" --local --runs-dir "$RUNS" --run "$(ls -d "$RUNS"/*/* | tail -1)" \
  --skip allreduce,storage,rdma --no-naive --metrics-textfile "$OUT/h200-bench.prom" \
  >"$OUT/bench.txt" 2>&1
rc "bench" $? $((SECONDS - t0))

# The platform team certifies that run (its report says PASS), then validates again.
python3 - "$(ls -d "$RUNS"/*/* | tail -1)" <<'PY'
import sys
from rackcert.core.runs import RunDir
RunDir.open(sys.argv[1]).write_stage("report", {"verdict": "PASS", "reasons": ["h200 evidence"]})
PY
t0=$SECONDS
python3 -m rackcert.cli validate "$SPEC" --local --runs-dir "$RUNS" \
  --metrics-textfile "$OUT/h200-validate-2.prom" >"$OUT/validate-2.txt" 2>&1
rc "validate 2 (against the certified run)" $? $((SECONDS - t0))

nvidia-smi --query-gpu=name,driver_version,pci.bus_id,uuid --format=csv,noheader >"$OUT/gpu.txt"
ls -l "$OUT"
