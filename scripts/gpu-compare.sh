#!/usr/bin/env bash
# Times forced algorithms against NCCL on every visible GPU, NCCL in the same run (not in CI):
#   scripts/gpu-compare.sh BUILD COLL:ALGO[:G] ...   (ALGO "table": the selection table's choice;
#                                                      G: CUDA-graph replays, default 0 = eager)
# SIZES (default 64K,256K,1M,4M,16M,64M,256M). Logs under $OUT; a table of time (us, out of place)
# and NCCL / ours per size last. XHOSTS=H: the ranks act as H hosts (rank r on host r*H/n: our
# MSCCLPP_HOSTID and NCCL's NCCL_HOSTID), NCCL between them on its socket transport over
# NCCL_SOCKET_IFNAME (default lo) with InfiniBand off, as our tcp/net transports. NCCL_SYMM=1:
# mscclpp-perf --nccl-symm, NCCL also on symmetric windows (ncclMemAlloc + ncclCommWindowRegister):
# the table gains its time and symm / ours (logs: LABEL-symm.txt).
set -uo pipefail
build=$1; shift
out=${OUT:-gpu-logs}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export MSCCLPP_ALGO_TABLE="$PWD/tuning/algo.tsv"
bin="$PWD/$build/bin"
n=${NRANKS:-$(nvidia-smi -L | wc -l)}
sizes=${SIZES:-64K,256K,1M,4M,16M,64M,256M}
rows=()
wrap=()
ncclopt=--nccl
symm=
if [ "${NCCL_SYMM:-0}" = 1 ]; then ncclopt=--nccl-symm symm=-symm; fi
if [ -n "${XHOSTS:-}" ]; then
  export XHOSTS NCCL_IB_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
  wrap=(bash -c 'h=xh$((MSCCLPP_RANK * XHOSTS / MSCCLPP_WORLD_SIZE)); MSCCLPP_HOSTID=$h NCCL_HOSTID=$h exec "$0" "$@"')
fi
for spec in "$@"; do
  IFS=: read -r coll algo graphs <<<"$spec"
  graphs=${graphs:-0}
  label="$coll-$algo-g$graphs-n$n$symm"
  envs=()
  [ "$algo" != table ] && envs+=("MSCCLPP_ALGO=$algo")
  env "${envs[@]}" timeout 200 "$bin/mscclpp-run" -n "$n" -- "${wrap[@]}" "$bin/mscclpp-perf" "$coll" -s "$sizes" -n 20 -w 5 -G "$graphs" -c 1 $ncclopt >"$out/$label.txt" 2>&1
  rc=$?
  # rows: size count type redop root time algbw busbw #wrong (x2) impl; ratio rows: size nccl/ours|symm/ours r r ratio
  wrong=$(awk '$1 ~ /^[0-9]+$/ && $NF == "mscclpp" && ($9 != 0 || $13 != 0)' "$out/$label.txt" | wc -l)
  rows+=("== $label (rc $rc, rows with wrong results: $wrong)")
  while read -r sz; do
    ours=$(awk -v s="$sz" '$1 == s && $NF == "mscclpp" {print $6; exit}' "$out/$label.txt")
    nccl=$(awk -v s="$sz" '$1 == s && $NF == "nccl" {print $6; exit}' "$out/$label.txt")
    ratio=$(awk -v s="$sz" '$1 == s && $2 == "nccl/ours" {print $3; exit}' "$out/$label.txt")
    line=$(printf '  %11s  ours %9s  nccl %9s  %7s' "$sz" "$ours" "$nccl" "$ratio")
    ns=$(awk -v s="$sz" '$1 == s && $NF == "nccl-symm" {print $6; exit}' "$out/$label.txt")
    nsr=$(awk -v s="$sz" '$1 == s && $2 == "symm/ours" {print $3; exit}' "$out/$label.txt")
    [ -n "$ns$nsr" ] && line+=$(printf '  nccl-symm %9s  %7s' "$ns" "$nsr")
    rows+=("$line")
  done < <(awk '$1 ~ /^[0-9]+$/ && $NF == "mscclpp" {print $1}' "$out/$label.txt" | sort -un)
done
printf '%s\n' "${rows[@]}"
