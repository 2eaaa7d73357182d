#!/usr/bin/env bash
# nccl-tests on this library's NCCL API and on the real NCCL, same binaries, same run, one table.
#
#   scripts/nccl-tests.sh NT_BUILD LIBDIR [NGPUS...]
#
# NT_BUILD: a build of NVIDIA/nccl-tests against nccl/include (make -C src NCCL_HOME=H with
# H/include = nccl/include and H/lib = LIBDIR/nccl); its binaries need libnccl.so.2, which
# LD_LIBRARY_PATH points at LIBDIR/nccl (this library) or at the real NCCL (found in the Python
# environment's nvidia-nccl wheel, or NCCL_LIB_DIR). Each binary runs with -g N (N GPUs driven by
# one process), -c 1 (results checked), NCCL_NVLS_ENABLE=0. Logs under $OUT (or nccl-tests-logs/);
# the table last: per collective and size, time (us, out of place) with each library, the ratio
# (NCCL time / ours: above 1, ours faster) and the wrong-element counts.
set -uo pipefail
nt=${1:?nccl-tests build dir}
lib=$(realpath "${2:?library dir (with nccl/libnccl.so.2)}")
shift 2
gpus=("${@:-4}")
out=${OUT:-nccl-tests-logs}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
real=${NCCL_LIB_DIR:-$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)}
extra=${NT_EXTRA_LIBS:-$nt/lib} # e.g. a libcudart.so.13 carried beside the binaries
colls=${NT_COLLS:-"all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv gather scatter"}
sizes=${NT_SIZES:-"-b 8 -e 128M -f 8"}
for g in "${gpus[@]}"; do
  for c in $colls; do
    for which in ours nccl; do
      dir=$lib/nccl
      [ "$which" = nccl ] && dir=$real
      [ -n "$dir" ] || { echo "no real NCCL found (set NCCL_LIB_DIR)" >"$out/$c-g$g-$which.txt"; continue; }
      LD_LIBRARY_PATH="$dir:$lib:$extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout "${NT_TIMEOUT:-90}" \
        "$nt/${c}_perf" $sizes -g "$g" -c 1 -w 5 -n 20 >"$out/$c-g$g-$which.txt" 2>&1
      echo "exit $?" >>"$out/$c-g$g-$which.txt"
    done
  done
done
# The table: the out-of-place time and wrong count of each size line (nccl-tests' columns: size
# count type redop root time algbw busbw #wrong ...; sendrecv/alltoall have the same layout).
printf '\n%-15s %4s %11s %10s %10s %7s %6s %6s\n' collective gpus bytes "ours us" "nccl us" ratio wrong nwrong
for g in "${gpus[@]}"; do
  for c in $colls; do
    a="$out/$c-g$g-ours.txt" b="$out/$c-g$g-nccl.txt"
    grep -q "^exit 0" "$a" || echo "$c -g $g (ours): $(grep -m1 -iE 'error|fail|invalid' "$a" || tail -1 "$a")"
    join <(awk '$1 ~ /^[0-9]+$/ && NF >= 13 {print $1, $6, $9}' "$a" | sort -k1,1) \
         <(awk '$1 ~ /^[0-9]+$/ && NF >= 13 {print $1, $6, $9}' "$b" 2>/dev/null | sort -k1,1) 2>/dev/null |
      sort -n | awk -v c="$c" -v g="$g" '{ r = ($2 > 0) ? $4 / $2 : 0;
        printf "%-15s %4d %11d %10.2f %10.2f %6.2fx %6s %6s\n", c, g, $1, $2, $4, r, $3, $5 }'
  done
done
