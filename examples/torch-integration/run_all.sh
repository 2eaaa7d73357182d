#!/usr/bin/env bash
# Runs the three torch-integration examples, one after the other, under torchrun on this host's
# GPUs and prints one summary line per program; exits 1 if any failed or timed out.
#   examples/torch-integration/run_all.sh [NPROC]      # NPROC: ranks (default: every GPU)
# Env: LOG_DIR (each program's full output; default a new temporary folder), MASTER_PORT_BASE
# (torchrun's store port of the first program, default 29500; each program gets base + 10 * i; the
# MSCCL++ root takes a free port, see common.py), PYTHON (default python3, used where torchrun is
# not on PATH), TIMEOUT_S (each program's limit, default 300).
# NVLink multicast stays off: NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1.
set -u
here=$(cd "$(dirname "$0")" && pwd)
nproc=${1:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
if [ "${nproc:-0}" -lt 1 ]; then
  echo "run_all.sh: no GPU found (nvidia-smi -L); pass NPROC" >&2
  exit 2
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
if command -v torchrun >/dev/null; then launcher=(torchrun); else launcher=("${PYTHON:-python3}" -m torch.distributed.run); fi
log_dir=${LOG_DIR:-$(mktemp -d -t torch-integration.XXXXXX)}
mkdir -p "$log_dir"
port=${MASTER_PORT_BASE:-29500}
limit=${TIMEOUT_S:-300}
summary=()
failed=0
for prog in customized_comm_with_default_algo customized_comm_with_dsl customized_allgather; do
  log="$log_dir/$prog.log"
  echo "=== $prog: $nproc ranks (log: $log)"
  start=$(date +%s)
  timeout --kill-after=10 "$limit" "${launcher[@]}" --nnodes=1 --nproc_per_node="$nproc" --master_addr=127.0.0.1 \
    --master_port="$port" "$here/$prog.py" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  secs=$(($(date +%s) - start))
  case $rc in
    0) verdict=PASS ;;
    124 | 137) verdict="TIMEOUT ($limit s)" failed=1 ;;
    *) verdict="FAIL (exit $rc)" failed=1 ;;
  esac
  summary+=("$(printf '%-16s %-36s %d ranks, %4d s, %s' "$verdict" "$prog" "$nproc" "$secs" "$log")")
  port=$((port + 10))
done
echo "=== summary"
printf '%s\n' "${summary[@]}"
exit $failed
