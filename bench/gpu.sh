#!/usr/bin/env bash
# One prepared script for a CUDA machine (< 8 minutes): the LEBM and Dual-MCMC official-default
# iterations and the RBM and Langevin throughput benchmarks, written as one results table.
#   bash bench/gpu.sh [OUT_DIR]          (OUT_DIR defaults to bench/gpu_results)
# Each step has its own time limit so one slow step cannot eat the whole budget.
set -u
cd "$(dirname "$0")/.."
OUT="${1:-bench/gpu_results}"
PY="${PYTHON:-.venv/bin/python}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name())" || exit 1
run() {  # name, seconds, command...
  local name=$1 limit=$2; shift 2
  echo "== $name (limit ${limit}s)"
  timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.log"
  echo "== $name exit ${PIPESTATUS[0]}"
}
run lebm_svhn   150 "$PY" bench/lebm_device.py --device cuda --iters 20 --json "$OUT/lebm_device.json"
run dual_cifar  200 "$PY" bench/dual_mcmc_gpu.py --iters 5 --repeats 2  # ~3.9 s/iter on an H200
run throughput  120 "$PY" bench/gpu_throughput.py --device cuda --json "$OUT/throughput.json"
{
  echo "# GPU results ($(date -u +%F))"
  for f in "$OUT"/*.log; do echo; echo "## $(basename "$f" .log)"; echo; grep '^|' "$f" || tail -5 "$f"; done
} > "$OUT/results.md"
cat "$OUT/results.md"
