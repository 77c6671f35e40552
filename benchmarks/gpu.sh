#!/usr/bin/env bash
# GPU benchmark: extraction throughput and MFU of the packaged models at a few batch sizes and dtypes, the
# CKA grid and the permutation nulls on the device, in one JSON file (see benchmarks/bench_gpu.py).
#
#   benchmarks/gpu.sh                          # CUDA machine: writes benchmarks/results/gpu.json
#   OUT=/tmp/gpu.json benchmarks/gpu.sh --n 300 --batch-sizes 16,64
#   benchmarks/gpu.sh --device cpu --smoke     # the CPU smoke run (tiny sizes), to check the script
#
# PYTHON selects the interpreter (default: python). Extra arguments go to bench_gpu.py.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
OUT="${OUT:-benchmarks/results/gpu.json}"
case " $* " in
  *" --device cpu "*) ;;
  *)
    "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else \
'torch sees no CUDA device; on a CPU run: benchmarks/gpu.sh --device cpu --smoke')"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    ;;
esac
PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}" exec "$PY" benchmarks/bench_gpu.py --out "$OUT" "$@"
