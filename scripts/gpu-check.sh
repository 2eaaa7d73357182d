#!/usr/bin/env bash
# The one-call GPU check: on a machine with GPUs, run every GPU test (the built-in collectives'
# coll_gpu_* included) and the key measurements (allreduce, allgather, reducescatter, alltoall at
# 8 B .. 1 GiB against NCCL from the same run, mscclpp-perf -G; execution plans against the built-in allreduce; mscclpp-primbench --sweep) from a build
# made elsewhere (carried in BUILD), write full logs under $OUT (or ./gpu-logs), and print a short
# table last. On one GPU, MSCCLPP_TEST_SHARE_GPUS=1 runs the multi-rank tests with ranks sharing it
# (correctness only; the bulk tests take minutes), the plans' rows time one rank, and primbench and
# the LL kernels (forced) run on one rank.
#   scripts/gpu-check.sh [BUILD]     (BUILD: a build dir, or a copy from scripts/gpu-bundle.sh)
# Parts can be left out or narrowed to fit a device call: GPU_CHECK_TESTS (a ctest -R filter),
# GPU_CHECK_PERF=0 (no NCCL comparison), GPU_CHECK_PLANS=0, GPU_CHECK_PRIM=0;
# GPU_CHECK_TUNE=1 adds mscclpp-tune's re-made tuning/algo.tsv; GPU_CHECK_TEST_TIMEOUT and
# GPU_CHECK_PERF_TIMEOUT bound each test / benchmark run.
set -uo pipefail
build=${1:-build}
out=${OUT:-gpu-logs}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# The collectives' selection table of this checkout (a bundle's bin/ has no tuning/ beside it).
[ -z "${MSCCLPP_ALGO_TABLE:-}" ] && [ -e "$PWD/tuning/algo.tsv" ] && export MSCCLPP_ALGO_TABLE="$PWD/tuning/algo.tsv"

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
# The corpus test's fixture runs the Python the build machine found: lead that path to this
# machine's python3 when it does not exist here.
py=$(sed -n 's/^_\{0,1\}Python3_EXECUTABLE:[A-Z]*=//p' "$build/CMakeCache.txt" | head -1)
if [ -n "$py" ] && [ ! -e "$py" ] && command -v python3 >/dev/null; then
  mkdir -p "$(dirname "$py")" && ln -sfn "$(command -v python3)" "$py"
fi
bin="$PWD/$build/bin"
ngpus=$(nvidia-smi -L 2>/dev/null | wc -l)

{ nvidia-smi; nvidia-smi topo -m; } >"$out/machine.txt" 2>&1
"$bin/mscclpp-info" >"$out/info.txt" 2>&1

summary=()
add() { summary+=("$(printf '%-44s %s' "$1" "$2")"); }

# GPU_CHECK_TESTS: a ctest -R filter; GPU_CHECK_TEST_TIMEOUT / GPU_CHECK_PERF_TIMEOUT: seconds per
# test / per benchmark run (lower them for a first run of new code, where a hang is likely).
test_timeout=${GPU_CHECK_TEST_TIMEOUT:-300}
perf_timeout=${GPU_CHECK_PERF_TIMEOUT:-300}
(cd "$build" && ctest -L gpu ${GPU_CHECK_TESTS:+-R "$GPU_CHECK_TESTS"} --output-on-failure --timeout "$test_timeout") >"$out/gpu-tests.log" 2>&1
while read -r line; do
  name=$(echo "$line" | sed -E 's/.*Test +#[0-9]+: ([^ ]+) .*/\1/')
  status=$(echo "$line" | grep -oE 'Passed|\*\*\*Failed|\*\*\*Skipped|Not Run|\*\*\*Timeout|Exception' | head -1)
  time=$(echo "$line" | grep -oE '[0-9.]+ sec' | head -1)
  add "test $name" "${status:-?} ${time}"
done < <(grep -E 'Test +#[0-9]+:' "$out/gpu-tests.log")

if [ "$ngpus" -ge 2 ]; then
  "$bin/mscclpp-run" -n "$ngpus" "$bin/example_ring_demo" 4096 1048576 67108864 >"$out/ring-demo.txt" 2>&1
  add "ring demo ($ngpus GPU ranks)" "exit $?"
  "$bin/mscclpp-run" -n "$ngpus" "$bin/example_collectives_demo" >"$out/collectives-demo.txt" 2>&1
  add "collectives demo ($ngpus GPU ranks)" "exit $?"
fi

# The built-in collectives against NCCL, same run, CUDA-graph timing (-G). Small sizes are checked
# (-c 1); 256 MiB and 1 GiB are timed only (the host check of 1 GiB takes minutes).
if [ -z "${MSCCLPP_NCCL_LIB_PATH:-}" ]; then
  nccl_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
  [ -n "$nccl_lib" ] && [ -e "$nccl_lib" ] && export MSCCLPP_NCCL_LIB_PATH="$nccl_lib"
fi
perf_table=()
perf() { # perf NAME COLL SIZES ARGS...
  local name=$1 coll=$2 sizes=$3
  shift 3
  timeout "$perf_timeout" "$bin/mscclpp-run" -n "$ngpus" "$bin/mscclpp-perf" "$coll" --gpu --nccl -s "$sizes" "$@" \
    >"$out/perf-$name.txt" 2>&1
  local rc=$?
  add "perf $name ($ngpus GPU ranks)" "exit $rc$(grep -q 'FAILED' "$out/perf-$name.txt" && echo ', WRONG RESULTS')"
  # rows: size count type redop root time algbw busbw #wrong (x2) impl; ratio rows: size nccl/ours r r ratio
  perf_table+=("$(awk -v c="${label:-$coll}" '
    $NF == "mscclpp" { ours[$1] = $6; bw[$1] = $8; wr[$1] = $9 }
    $NF == "nccl"    { nccl[$1] = $6; nbw[$1] = $8 }
    $NF == "ratio"   { printf "%-14s %11s %10s %10s %8s %9s %9s %6s\n", c, $1, ours[$1], nccl[$1], $3, bw[$1], nbw[$1], wr[$1] }
  ' "$out/perf-$name.txt")")
}
# GPU_CHECK_PERF=0 skips the comparison (a tests-only run).
if [ "$ngpus" -ge 2 ] && [ "${GPU_CHECK_PERF:-1}" != 0 ]; then
  for coll in allreduce allgather reducescatter alltoall; do
    perf "$coll-small" "$coll" 8,1K,64K,1M,16M -n 20 -w 5 -G 20 -c 1
    perf "$coll-large" "$coll" 256M,1G -n 10 -w 2 -G 3 -c 0
  done
fi

# Execution plans against the built-ins through the collectives (allreduce, the performance plans of
# tests/plans/gen_plans.py --perf registered with MSCCLPP_PLAN_DIR, results checked, CUDA graphs).
# On one GPU: one rank, the executor's fixed cost (copy / LL-packet plans of 1 and 64 blocks).
plan_table=()
perf_plans=$(mktemp -d) # not under $out: the device tool brings back only a few files
if [ "$ngpus" -ge 1 ] && [ "${GPU_CHECK_PLANS:-1}" != 0 ] &&
   python3 tests/plans/gen_plans.py --perf "$perf_plans" 2>"$out/perf-plans.err"; then
  mkdir -p "$perf_plans/none"
  if [ "$ngpus" -ge 2 ]; then nr=$ngpus kinds="builtin ll1 ll rres"; else nr=1 kinds="builtin copy1 copy ll1 ll"; fi
  for kind in $kinds; do
    dir="$perf_plans/$kind"
    [ "$kind" = builtin ] && dir="$perf_plans/none"
    MSCCLPP_PLAN_DIR="$dir" timeout "$perf_timeout" "$bin/mscclpp-run" -n "$nr" "$bin/mscclpp-perf" allreduce --gpu \
      -s 1K,64K,1M,16M,256M -n 20 -w 5 -G 20 -c 1 >"$out/plan-$kind.txt" 2>&1
    add "plans: allreduce $kind ($nr GPU ranks)" "exit $?$(grep -q 'FAILED' "$out/plan-$kind.txt" && echo ', WRONG RESULTS')"
    plan_table+=("$(awk -v k="$kind" '$1 ~ /^[0-9]+$/ && NF >= 13 { printf "%-8s %11s %10s %10s\n", k, $1, $6, $10 }' "$out/plan-$kind.txt")")
  done
fi
rm -rf "$perf_plans"

# The channel primitives against raw baselines (issue 3's table), with the put/get sweep from 4 KiB
# to 1 GiB (SM and copy-engine puts and gets), one peer and all peers at once (GPU_CHECK_PRIM=0
# skips it). Its table is only printed (primbench.txt), never parsed here.
if [ "$ngpus" -ge 2 ] && [ "${GPU_CHECK_PRIM:-1}" != 0 ]; then
  timeout "$perf_timeout" "$bin/mscclpp-run" -n "$ngpus" "$bin/mscclpp-primbench" --sweep >"$out/primbench.txt" 2>&1
  add "primbench --sweep ($ngpus GPU ranks)" "exit $?"
fi

# One GPU: what it can measure of issue 3 and 4 - the primitives between two blocks of the GPU with
# the fence a release costs (primbench on one rank), and the built-in LL kernels' cost without
# peers (the algorithm forced on one rank; otherwise a one-rank collective is a copy).
one_gpu_table=()
if [ "$ngpus" -eq 1 ] && [ "${GPU_CHECK_PRIM:-1}" != 0 ]; then
  timeout "$perf_timeout" "$bin/mscclpp-run" -n 1 "$bin/mscclpp-primbench" >"$out/primbench.txt" 2>&1
  add "primbench (one rank)" "exit $?"
  for c in allreduce:gpu_allreduce_ll1 allgather:gpu_allgather_ll reducescatter:gpu_reducescatter_ll; do
    MSCCLPP_ALGO=${c#*:} timeout "$perf_timeout" "$bin/mscclpp-run" -n 1 "$bin/mscclpp-perf" "${c%%:*}" --gpu \
      -s 8,1K,64K -n 50 -w 10 -G 50 -c 1 >"$out/perf-1rank-${c#*:}.txt" 2>&1
    add "perf ${c#*:} (one rank)" "exit $?$(grep -q 'FAILED' "$out/perf-1rank-${c#*:}.txt" && echo ', WRONG RESULTS')"
    one_gpu_table+=("$(awk -v a="${c#*:}" '$1 ~ /^[0-9]+$/ && NF >= 13 { printf "%-22s %10s %10s\n", a, $1, $6 }' "$out/perf-1rank-${c#*:}.txt")")
  done
fi

# Opt-in (GPU_CHECK_TUNE=1, minutes: give it a device call of its own, GPU_CHECK_TESTS=none
# GPU_CHECK_PERF=0 GPU_CHECK_PLANS=0 GPU_CHECK_PRIM=0): mscclpp-tune re-makes the rules of tuning/algo.tsv for
# this number of GPUs (every GPU algorithm forced, captured-only ones included, 8 B .. 1 GiB) into a
# copy, $out/algo.tsv, to review and commit; the table lists each algorithm's time per size.
tune_table=()
if [ "${GPU_CHECK_TUNE:-0}" = 1 ] && [ "$ngpus" -ge 2 ]; then
  cp tuning/algo.tsv "$out/algo.tsv"
  timeout 540 "$bin/mscclpp-tune" -n "$ngpus" --kind gpu --collectives allreduce,allgather,reducescatter,alltoall \
    -b 8 -e 1G -f 4 --iters 10 --warmup 3 --graphs 5 --bin "$bin" --update "$out/algo.tsv" >"$out/tune.txt" 2>&1
  add "mscclpp-tune ($ngpus GPU ranks)" "exit $?"
  tune_table+=("$(grep -v '^#' "$out/tune.txt")")
fi

# The device tool brings back only a few files: everything also goes into one archive.
tar -czf "$out/logs.tgz" -C "$out" --exclude logs.tgz . 2>/dev/null
cat "$out/ring-demo.txt" "$out/collectives-demo.txt" "$out/primbench.txt" 2>/dev/null
echo
if [ "${#tune_table[@]}" -gt 0 ]; then
  echo "== mscclpp-tune: new rules (in $out/algo.tsv; times per algorithm in tune.txt) =="
  printf '%s\n' "${tune_table[@]}" | sed '/^$/d'
  echo
fi
echo "== GPU check on $ngpus GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) =="
printf '%s\n' "${summary[@]}"
if [ "${#plan_table[@]}" -gt 0 ]; then
  echo
  echo "== allreduce: execution plans vs built-in (us, CUDA graphs; out of place, in place) =="
  printf '%s\n' "${plan_table[@]}" | sed '/^$/d'
fi
if [ "${#one_gpu_table[@]}" -gt 0 ]; then
  echo
  echo "== built-in LL kernels on one rank, no peers (us, CUDA graphs) =="
  printf '%s\n' "${one_gpu_table[@]}" | sed '/^$/d'
fi
if [ "${#perf_table[@]}" -gt 0 ]; then
  echo
  echo "== collectives vs NCCL (float sum, out of place, CUDA graphs; ratio = NCCL time / ours, >1: ours faster) =="
  printf '%-14s %11s %10s %10s %8s %9s %9s %6s\n' collective bytes "ours(us)" "nccl(us)" ratio "busbw" "ncclbw" wrong
  printf '%s\n' "${perf_table[@]}" | sed '/^$/d'
fi
