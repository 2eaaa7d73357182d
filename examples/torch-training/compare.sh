#!/usr/bin/env bash
# Trains the same model with DDP and with FSDP2 over our backend and over NCCL (train.py, torchrun
# on this host), then prints per mode: final loss ours vs NCCL, |difference| (flagged beyond
# TOL relative), tokens/s ours vs NCCL and ratio = ours tokens/s / NCCL tokens/s (= NCCL time /
# ours time, as every table of this project: above 1, ours is faster).
# Exits 1 when a run fails or times out or a loss pair differs beyond the tolerance.
#   examples/torch-training/compare.sh [NPROC] [train.py args...]    # NPROC: default every GPU
#   examples/torch-training/compare.sh 4 --model mlp --dtype bfloat16
# Env: OURS (default mscclpp), REF (default nccl), MODES (default "ddp fsdp"), TOL (relative loss
# tolerance, default 1e-3), TIMEOUT_S (each run, default 300), LOG_DIR (each run's output; default
# a new temporary folder), MASTER_PORT_BASE (default 29600, each run +10), PYTHON (used where
# torchrun is not on PATH). NVLink multicast stays off: NCCL_NVLS_ENABLE=0,
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1.
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [[ ${1:-} =~ ^[0-9]+$ ]]; then nproc=$1; shift; else nproc=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU'); fi
if [ "${nproc:-0}" -lt 1 ]; then
  echo "compare.sh: no GPU found (nvidia-smi -L); pass NPROC" >&2
  exit 2
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
if command -v torchrun >/dev/null; then launcher=(torchrun); else launcher=("${PYTHON:-python3}" -m torch.distributed.run); fi
ours=${OURS:-mscclpp} ref=${REF:-nccl} tol=${TOL:-1e-3} limit=${TIMEOUT_S:-300}
log_dir=${LOG_DIR:-$(mktemp -d -t torch-training.XXXXXX)}
mkdir -p "$log_dir"
port=${MASTER_PORT_BASE:-29600}
failed=0
results=()  # "mode backend loss tokens_per_s" per run; loss FAIL when the run gave no RESULT

for mode in ${MODES:-ddp fsdp}; do
  for backend in "$ref" "$ours"; do
    log="$log_dir/$mode-$backend.log"
    echo "=== $mode $backend: $nproc ranks (log: $log)"
    timeout --kill-after=10 "$limit" "${launcher[@]}" --nnodes=1 --nproc_per_node="$nproc" --master_addr=127.0.0.1 \
      --master_port="$port" "$here/train.py" --mode "$mode" --backend "$backend" "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    port=$((port + 10))
    line=$(grep '^RESULT ' "$log" | tail -1)
    if [ "$rc" -ne 0 ] || [ -z "$line" ]; then
      echo "=== $mode $backend: FAILED (exit $rc$([ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && echo ", timeout $limit s"))"
      failed=1
      results+=("$mode $backend FAIL 0")
      continue
    fi
    loss=$(sed -n 's/.* final_loss=\([^ ]*\).*/\1/p' <<<"$line")
    tps=$(sed -n 's/.* tokens_per_s=\([^ ]*\).*/\1/p' <<<"$line")
    results+=("$mode $backend $loss $tps")
  done
done

echo "=== $ours vs $ref, $nproc ranks (train.py args: ${*:-none}; logs: $log_dir)"
printf '%s\n' "${results[@]}" | awk -v ours="$ours" -v ref="$ref" -v tol="$tol" '
  { loss[$1, $2] = $3; tps[$1, $2] = $4; if (!($1 in seen)) { seen[$1] = 1; order[n++] = $1 } }
  function abs(x) { return x < 0 ? -x : x }
  END {
    printf "%-5s %12s %12s %10s %13s %13s %8s  %s\n", "mode", "loss " ours, "loss " ref, "|diff|",
           "tok/s " ours, "tok/s " ref, "ratio", "verdict"
    bad = 0
    for (i = 0; i < n; i++) {
      m = order[i]; lo = loss[m, ours]; lr = loss[m, ref]
      if (lo == "FAIL" || lr == "FAIL") {
        printf "%-5s %12s %12s %10s %13s %13s %8s  %s\n", m, lo, lr, "-", tps[m, ours], tps[m, ref], "-", "RUN FAILED"
        bad = 1; continue
      }
      d = abs(lo - lr); rel = d / (abs(lr) > 0 ? abs(lr) : 1)
      verdict = rel > tol ? "LOSS DIFFERS (rel " sprintf("%.2g", rel) " > " tol ")" : "ok"
      if (rel > tol) bad = 1
      ratio = tps[m, ref] > 0 ? sprintf("%.3f", tps[m, ours] / tps[m, ref]) : "-"
      printf "%-5s %12.6f %12.6f %10.2e %13.1f %13.1f %8s  %s\n", m, lo, lr, d, tps[m, ours], tps[m, ref], ratio, verdict
    }
    exit bad
  }'
[ "${PIPESTATUS[1]}" -eq 0 ] || failed=1
exit $failed
