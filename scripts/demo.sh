#!/usr/bin/env bash
# README's main job (make demo): builds what examples/collectives_demo.c needs and runs it on 4
# ranks, printing little besides the demo's own table.
#   scripts/demo.sh [GPU_BUILD] [CPU_BUILD]
# With a GPU (nvidia-smi lists one and nvcc exists) it builds the library with its GPU code in
# GPU_BUILD (default build, the folder make test uses) and the ranks are GPU ranks. Without one it
# builds only the CPU library, the launcher and the demo, in Release, in CPU_BUILD (default
# build-demo): no CUDA kernels to compile for a GPU that is not there. The build's output goes to
# BUILD/demo-build.log, shown only when the build fails. JOBS (default: every core) compiles in
# parallel.
set -euo pipefail
cd "$(dirname "$0")/.."
gpu_build=${1:-build}
cpu_build=${2:-build-demo}
jobs=${JOBS:-$(nproc)}

have_gpu() {
  command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU' &&
    { command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; }
}

if have_gpu; then
  build=$gpu_build
  flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
  what="the library with its GPU code"
else
  build=$cpu_build
  flags=(-DCMAKE_BUILD_TYPE=Release -DMSCCLPP_USE_CUDA=OFF -DMSCCLPP_BUILD_TESTS=OFF)
  what="the CPU library (no GPU here)"
fi
mkdir -p "$build"
log="$build/demo-build.log"
echo "demo: building $what, mscclpp-run and the demo in $build/ (log: $log)"
start=$(date +%s)
if ! { cmake -S . -B "$build" "${flags[@]}" ${CMAKE_FLAGS:-} &&
       cmake --build "$build" -j "$jobs" --target mscclpp-run example_collectives_demo; } >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "demo: the build failed (full output: $log)" >&2
  exit 1
fi
echo "demo: built in $(( $(date +%s) - start )) s; running 4 ranks"
exec "$build/bin/mscclpp-run" -n 4 "$build/bin/example_collectives_demo"
