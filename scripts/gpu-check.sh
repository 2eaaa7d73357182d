#!/usr/bin/env bash
# The one-call GPU check: on a machine with GPUs, run every GPU test and the key measurements
# from a build made elsewhere (carried in BUILD), write full logs under $OUT (or ./gpu-logs),
# and print a short table last.
#   scripts/gpu-check.sh [BUILD]     (BUILD: a build dir, or a copy from scripts/gpu-bundle.sh)
set -uo pipefail
build=${1:-build}
out=${OUT:-gpu-logs}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

# ctest files hold the absolute paths of the machine that built them: make those paths lead to
# this copy (scripts/gpu-bundle.sh) and to this checkout.
src_dir=$(sed -n 's/^mscclpp_SOURCE_DIR:STATIC=//p' "$build/CMakeCache.txt")
bin_dir=$(sed -n 's/^mscclpp_BINARY_DIR:STATIC=//p' "$build/CMakeCache.txt")
if [ -n "$src_dir" ] && [ ! -e "$src_dir" ]; then
  mkdir -p "$src_dir"
  for e in "$PWD"/*; do ln -sfn "$e" "$src_dir/$(basename "$e")"; done
fi
if [ -n "$bin_dir" ] && [ "$(realpath -m "$bin_dir")" != "$(realpath "$build")" ]; then
  rm -rf "$bin_dir" && ln -sfn "$(realpath "$build")" "$bin_dir"
fi
bin="$PWD/$build/bin"
ngpus=$(nvidia-smi -L 2>/dev/null | wc -l)

{ nvidia-smi; nvidia-smi topo -m; } >"$out/machine.txt" 2>&1
"$bin/mscclpp-info" >"$out/info.txt" 2>&1

summary=()
add() { summary+=("$(printf '%-44s %s' "$1" "$2")"); }

(cd "$build" && ctest -L gpu --output-on-failure --timeout 300) >"$out/gpu-tests.log" 2>&1
while read -r line; do
  name=$(echo "$line" | sed -E 's/.*Test +#[0-9]+: ([^ ]+) .*/\1/')
  status=$(echo "$line" | grep -oE 'Passed|\*\*\*Failed|\*\*\*Skipped|Not Run|\*\*\*Timeout|Exception' | head -1)
  time=$(echo "$line" | grep -oE '[0-9.]+ sec' | head -1)
  add "test $name" "${status:-?} ${time}"
done < <(grep -E 'Test +#[0-9]+:' "$out/gpu-tests.log")

if [ "$ngpus" -ge 2 ]; then
  "$bin/mscclpp-run" -n "$ngpus" "$bin/example_ring_demo" 4096 1048576 67108864 >"$out/ring-demo.txt" 2>&1
  add "ring demo ($ngpus GPU ranks)" "exit $?"
fi

cat "$out/ring-demo.txt" 2>/dev/null
echo
echo "== GPU check on $ngpus GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) =="
printf '%s\n' "${summary[@]}"
