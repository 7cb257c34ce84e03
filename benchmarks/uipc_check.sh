#!/usr/bin/env bash
# libuipc on a machine with an NVIDIA GPU, in one run of a few minutes: benchmarks/uipc_check.py
# (the first-use kernel compilation, the 1000-box pile bare and through device = "libuipc", the
# physics scenes on libuipc and on the CPU, the 125-box pile and the 100-link chain). With $WHEELS
# (a folder of wheels: pyuipc, ipctk) they are installed into /tmp/site first, without the network
# and without their declared dependencies (pyuipc's GUI and download helpers are not needed).
# Results go under $OUT (default build/uipc_check): results.json, the trajectories, log.txt.
# docs/gpu.md and docs/performance.md ("libuipc on the GPU") give the figures of its runs.
#
#     WHEELS=.gpu/whl OUT=build/uipc_check bash benchmarks/uipc_check.sh [--backend none] [--budget S]
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-build/uipc_check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# Hopper GPUs (H100, H200) compile libuipc's PTX on first use: give the driver's cache room for it.
export CUDA_CACHE_MAXSIZE=${CUDA_CACHE_MAXSIZE:-4294967296}
PYTHON=${PYTHON:-python3}
if [ -n "${WHEELS:-}" ]; then
    echo "installing $(ls "$WHEELS"/*.whl | xargs -n1 basename | tr '\n' ' ')into /tmp/site"
    "$PYTHON" -m pip install --quiet --no-index --no-deps --target /tmp/site "$WHEELS"/*.whl || exit 1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$OUT/log.txt"
"$PYTHON" --version 2>&1 | tee -a "$OUT/log.txt"
"$PYTHON" benchmarks/uipc_check.py --out "$OUT" "$@" 2>&1 | tee -a "$OUT/log.txt"
exit "${PIPESTATUS[0]}"
