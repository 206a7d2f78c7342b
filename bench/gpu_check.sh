#!/usr/bin/env bash
# The agent's GPU check (issue 17), on one GPU host, from the checkout, nothing installed:
#
#     PYTHONPATH=. bash bench/gpu_check.sh
#
# Needs python3 with torch (CUDA), numpy and nvidia-ml-py. Writes bench/results/gpu.json and
# prints PASS/FAIL per part and a last line "GPU CHECK: PASS" or "GPU CHECK: FAIL (...)".
# Exit status: 0 pass, 1 fail, 77 skipped (no CUDA device: "SKIP: no CUDA device ..."),
# 124/137 the 8-minute bound was hit (the check bounds each part itself well inside it).
# PYTHON=/path/to/python overrides the interpreter.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# Deterministic cuBLAS for the bit-for-bit comparison (the job sets it too, before its first
# matmul); inherited by every process of the check.
export CUBLAS_WORKSPACE_CONFIG="${CUBLAS_WORKSPACE_CONFIG:-:4096:8}"
exec timeout --kill-after=10 480 "${PYTHON:-python3}" -m bench.gpu_check "$@"
