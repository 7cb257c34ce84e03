#!/usr/bin/env bash
# The CuPy path on a machine with an NVIDIA GPU, in one run: what is installed, the GPU tests of
# tests/solver/test_device_solver.py (which skip without a GPU), the linear solvers per
# factorisation (benchmarks/linear_solvers.py, CPU and GPU rows), and whole chains on both devices
# (benchmarks/chains.py), and the hanging net on both devices (chains.py --kinds net, the looped
# scene the GPU path is for). Parts can be named to run only those. Needs NumPy, SciPy, Numba,
# threadpoolctl, pytest and CuPy in `python3`; writes each part's log under $OUT (default
# build/gpu_check). Prints figures; asserts nothing beyond the tests'. docs/performance.md
# ("The GPU path") gives the figures of its runs.
#
#     bash benchmarks/gpu_check.sh [versions tests linear_solvers chains net]
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-build/gpu_check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
failed=0
run() {  # run NAME SECONDS COMMAND...: one part, its output kept in $OUT/NAME.log, bounded in time
    local name=$1 seconds=$2; shift 2
    echo "=== $name: $(printf '%s ' "$@" | head -c 150)"
    local start=$SECONDS
    timeout "$seconds" "$@" 2>&1 | tee "$OUT/$name.log"
    local status=${PIPESTATUS[0]}
    echo "=== $name: exit $status after $((SECONDS - start)) s"
    if (( status != 0 )); then failed=1; fi
}
all_parts="versions tests linear_solvers chains net"
parts=${*:-$all_parts}
for part in $parts; do
    [[ " $all_parts " == *" $part "* ]] || { echo "unknown part '$part'; the parts are: $all_parts" >&2; exit 2; }
done
want() { [[ " $parts " == *" $1 "* ]]; }
# What the figures ran on: the GPU, the CPU (a 10^7-step Python loop as a yardstick of its speed) and the versions.
VERSIONS_PY='import os, sys, time
import numpy, scipy, numba
started = time.perf_counter()
[None for _ in range(10**7)]
print(f"{len(os.sched_getaffinity(0))} CPUs; a 10^7-step Python loop: {time.perf_counter() - started:.2f} s")
try:
    import cupy
    cupy_version = cupy.__version__
except ImportError:
    cupy_version = "not installed"
print("Python", sys.version.split()[0], "NumPy", numpy.__version__, "SciPy", scipy.__version__,
      "Numba", numba.__version__, "CuPy", cupy_version)'
want versions && run versions 60 bash -c 'nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv;
  lscpu | grep -i "model name"; python3 -c "$1"' versions "$VERSIONS_PY"
want tests && run tests 240 python3 -m pytest tests/solver/test_device_solver.py -q -p no:cacheprovider -rs
want linear_solvers && run linear_solvers 240 python3 benchmarks/linear_solvers.py --sizes 100 400 1024 2025 --repetitions 5
for device in cpu cupy; do
  want chains || break
  run "chains_240_$device" 240 python3 benchmarks/chains.py --device "$device" --sizes 10 100 1000 --dt 240 --seconds 1
  run "chains_24_$device" 240 python3 benchmarks/chains.py --device "$device" --sizes 1000 --dt 24 --steps-per-frame 1
done
for device in cpu cupy; do
  want net || break
  run "net_24_$device" 300 python3 benchmarks/chains.py --device "$device" --kinds net --sizes 100 400 1024 2025 \
    --dt 24 --steps-per-frame 1 --seconds 1
  run "net_240_$device" 120 python3 benchmarks/chains.py --device "$device" --kinds net --sizes 100 400 1024 --seconds 0.5
done
exit $failed
