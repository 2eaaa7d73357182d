#!/usr/bin/env bash
# nccl-tests on this library's NCCL API and on the real NCCL, same binaries, same run, one table.
#
#   scripts/nccl-tests.sh NT_BUILD LIBDIR [NGPUS...]            one process drives N GPUs (-g N)
#   scripts/nccl-tests.sh prepare-mpi NT_SRC LIBDIR [PACK]      here: an MPI build, packed for a GPU machine
#   scripts/nccl-tests.sh mpi PACK LIBDIR [NPROCS...]           there: N processes, one GPU each (-g 1)
#
# NT_BUILD: a build of NVIDIA/nccl-tests against nccl/include (make -C src NCCL_HOME=H with
# H/include = nccl/include and H/lib = LIBDIR/nccl); its binaries need libnccl.so.2, which
# LD_LIBRARY_PATH points at LIBDIR/nccl (this library) or at the real NCCL (found in the Python
# environment's nvidia-nccl wheel, or NCCL_LIB_DIR). Each binary runs with -g N (N GPUs driven by
# one process), -c 1 (results checked), NCCL_NVLS_ENABLE=0. Logs under $OUT (or nccl-tests-logs/);
# the table last: per collective and size, time (us, out of place) with each library, the ratio
# (NCCL time / ours: above 1, ours faster), busbw (GB/s, out of place) and the wrong-element counts
# (out of place + in place), then the totals.
#
# MPI mode. prepare-mpi (on a machine with nvcc and PyPI, no GPU needed): MPICH from its PyPI wheel
# (mpich==NT_MPICH_VERSION; mpiexec with hydra's fork launcher, mpicc, mpi.h, libmpi.so.12), the
# nccl-tests source NT_SRC (a folder, or a git dir whose HEAD is archived) built with make MPI=1 in
# NT_WORK (default /tmp/nccl-tests-mpi; kept, so a second prepare only relinks), for
# NT_GENCODE (default sm_90), then packed into PACK (default .gpu/nt-mpi.tar.xz): nt-mpi/ with
# the *_perf binaries, lib/ (the CUDA runtime they link) and mpi/ (mpiexec, hydra_pmi_proxy,
# libmpi.so.12 and the UCX/libfabric it loads). mpi (on the GPU machine): PACK unpacked to a
# temporary folder (or PACK an unpacked nt-mpi/), each binary run as `mpiexec -n N BIN ... -g 1`,
# once per library, under `timeout` (NT_TIMEOUT, default 120 s a run); same logs, same table.
# NT_TABLE_ONLY=1 (either mode) runs nothing and prints the table from the logs already in $OUT.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

if [ "${1:-}" = prepare-mpi ]; then
  set -e
  src=$(realpath "${2:?nccl-tests source: a folder, or a git dir}")
  lib=$(realpath "${3:?library dir (with nccl/libnccl.so)}")
  pack=$(realpath -m "${4:-$repo/.gpu/nt-mpi.tar.xz}")
  work=${NT_WORK:-/tmp/nccl-tests-mpi}
  mkdir -p "$work"
  work=$(realpath "$work")
  # MPI: the wheel's data folder is an installed, relocatable MPICH (its mpicc finds its own prefix).
  whl=$(ls "$work"/whl/mpich-*.whl 2>/dev/null | head -1 || true)
  if [ -z "$whl" ]; then
    python3 -m pip download --no-deps --only-binary=:all: -d "$work/whl" "mpich==${NT_MPICH_VERSION:-5.0.2}"
    whl=$(ls "$work"/whl/mpich-*.whl | head -1)
  fi
  if [ ! -d "$work/mpich" ]; then
    python3 -m zipfile -e "$whl" "$work/mpich.tmp" && mv "$work/mpich.tmp" "$work/mpich"
    chmod +x "$work"/mpich/mpich-*.data/data/bin/*
  fi
  mpi=$(ls -d "$work"/mpich/mpich-*.data/data | head -1)
  # The source, once (a new extraction would rebuild everything).
  if [ -f "$src/HEAD" ] && [ -d "$src/objects" ]; then
    if [ ! -d "$work/src/src" ]; then
      rm -rf "$work/src" && mkdir -p "$work/src"
      git --git-dir="$src" archive HEAD | tar -x -C "$work/src"
    fi
    src=$work/src
  fi
  [ -f "$src/src/Makefile" ] || { echo "$src: not a nccl-tests source (no src/Makefile)" >&2; exit 1; }
  home=$work/ncclhome
  rm -rf "$home" && mkdir -p "$home"
  ln -s "$repo/nccl/include" "$home/include"
  ln -s "$lib/nccl" "$home/lib"
  cuda=${CUDA_HOME:-/usr/local/cuda}
  make -C "$src/src" -j"${NT_JOBS:-2}" MPI=1 MPI_HOME="$mpi" NCCL_HOME="$home" CUDA_HOME="$cuda" \
    BUILDDIR="$work/build" NVCC_GENCODE="${NT_GENCODE:--gencode=arch=compute_90,code=sm_90}"
  stage=$work/pack/nt-mpi
  rm -rf "$work/pack" && mkdir -p "$stage/lib" "$stage/mpi/bin" "$stage/mpi/lib"
  cp "$work"/build/*_perf "$stage/"
  cudart=$(readelf -d "$stage/all_reduce_perf" | sed -n 's/.*NEEDED.*\[\(libcudart[^]]*\)\].*/\1/p')
  [ -z "$cudart" ] || cp -L "$cuda/lib64/$cudart" "$stage/lib/"
  cp "$mpi/bin/mpiexec.hydra" "$stage/mpi/bin/mpiexec"
  cp "$mpi/bin/hydra_pmi_proxy" "$stage/mpi/bin/"
  cp "$mpi/lib/libmpi.so.12" "$stage/mpi/lib/"
  cp -r "$mpi/lib/mpich" "$stage/mpi/lib/" # libmpi's RUNPATH: $ORIGIN/mpich (UCX, libfabric)
  cp -r "$work"/mpich/mpich-*.dist-info/licenses "$stage/mpi/"
  strip --strip-unneeded "$stage"/*_perf 2>/dev/null || true
  mkdir -p "$(dirname "$pack")"
  XZ_OPT=${XZ_OPT:--9 -T2} tar -C "$work/pack" -cJf "$pack" nt-mpi
  ls -l "$pack"
  exit 0
fi

mode=threads tag=g unit=gpus
if [ "${1:-}" = mpi ]; then
  mode=mpi tag=n unit=procs
  shift
fi
nt=${1:?nccl-tests build dir (MPI mode: the pack, or its unpacked nt-mpi folder)}
lib=$(realpath "${2:?library dir (with nccl/libnccl.so.2)}")
shift 2
gpus=("${@:-4}")
out=${OUT:-nccl-tests-logs}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
real=${NCCL_LIB_DIR:-$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)}
sizes=${NT_SIZES:-"-b 8 -e 128M -f 8"}
if [ "$mode" = mpi ]; then
  if [ -f "$nt" ]; then
    un=$(mktemp -d "${TMPDIR:-/tmp}/nt-mpi.XXXXXX")
    trap 'rm -rf "$un"' EXIT
    tar -xJf "$nt" -C "$un" || exit 1
    nt=$un/nt-mpi
  fi
  nt=$(realpath "$nt")
  extra=${NT_EXTRA_LIBS:-$nt/lib:$nt/mpi/lib}
  colls=${NT_COLLS:-"all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv gather scatter hypercube"}
  # Single node: hydra starts the ranks with fork (no ssh); MPI's own traffic over shared memory.
  export UCX_TLS=${UCX_TLS:-self,sm} MPIR_CVAR_ENABLE_GPU=${MPIR_CVAR_ENABLE_GPU:-0}
  "$nt/mpi/bin/mpiexec" -launcher fork -n 1 true || echo "mpiexec does not start (see above)"
  limit=${NT_TIMEOUT:-120}
else
  extra=${NT_EXTRA_LIBS:-$nt/lib} # e.g. a libcudart.so.13 carried beside the binaries
  colls=${NT_COLLS:-"all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv gather scatter"}
  limit=${NT_TIMEOUT:-90}
fi
for g in "${gpus[@]}"; do
  [ "${NT_TABLE_ONLY:-0}" = 1 ] && break # the table again from the logs of an earlier run in $OUT
  if [ "$mode" = mpi ]; then
    launch=("$nt/mpi/bin/mpiexec" -launcher fork -n "$g") per=1
  else
    launch=() per=$g
  fi
  for c in $colls; do
    for which in ours nccl; do
      log="$out/$c-$tag$g-$which.txt"
      dir=$lib/nccl
      [ "$which" = nccl ] && dir=$real
      [ -n "$dir" ] || { echo "no real NCCL found (set NCCL_LIB_DIR)" >"$log"; continue; }
      LD_LIBRARY_PATH="$dir:$lib:$extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        timeout -k 10 "$limit" ${launch[@]+"${launch[@]}"} "$nt/${c}_perf" $sizes -g "$per" -c 1 -w 5 -n 20 >"$log" 2>&1
      echo "exit $?" >>"$log"
    done
  done
done
# The table: the out-of-place time and busbw, and both wrong counts, of each size line
# (nccl-tests' columns: size count type redop root time algbw busbw #wrong, then in place time
# algbw busbw #wrong; sendrecv/alltoall have the same layout).
rows() { awk '$1 ~ /^[0-9]+$/ && NF >= 13 {print $1, $6, $8, $9 + $13}' "$1" 2>/dev/null | sort -k1,1; }
printf '\n%-15s %5s %11s %10s %10s %7s %9s %9s %6s %6s\n' collective "$unit" bytes "ours us" "nccl us" ratio \
  "ours GB/s" "nccl GB/s" wrong nwrong
for g in "${gpus[@]}"; do
  for c in $colls; do
    for which in ours nccl; do
      f="$out/$c-$tag$g-$which.txt"
      grep -q "^exit 0" "$f" && continue
      if grep -qE "^exit (124|137)$" "$f"; then
        echo "$c $unit=$g ($which): timed out after ${limit}s"
      else
        echo "$c $unit=$g ($which): $(grep -m1 -iE 'error|fail|invalid' "$f" || tail -1 "$f")"
      fi
    done
    join -a 1 -a 2 -e - -o 0,1.2,2.2,1.3,2.3,1.4,2.4 <(rows "$out/$c-$tag$g-ours.txt") <(rows "$out/$c-$tag$g-nccl.txt") |
      sort -n | awk -v c="$c" -v g="$g" '{ r = ($2 > 0 && $3 != "-") ? sprintf("%6.2fx", $3 / $2) : "     -";
        printf "%-15s %5d %11d %10s %10s %7s %9s %9s %6s %6s\n", c, g, $1, $2, $3, r, $4, $5, $6, $7 }'
  done
done
# The totals: runs that did not end with exit 0, size lines with wrong elements, wrong elements.
for which in ours nccl; do
  runs=0 failed=0
  for g in "${gpus[@]}"; do
    for c in $colls; do
      runs=$((runs + 1))
      grep -q "^exit 0" "$out/$c-$tag$g-$which.txt" || failed=$((failed + 1))
    done
  done
  cat $(for g in "${gpus[@]}"; do for c in $colls; do echo "$out/$c-$tag$g-$which.txt"; done; done) 2>/dev/null |
    awk -v w="$which" -v runs="$runs" -v failed="$failed" '$1 ~ /^[0-9]+$/ && NF >= 13 { n++; e = $9 + $13; if (e) bad++; tot += e }
      END { printf "%s: %d of %d runs failed; %d size lines, %d with wrong elements, %d wrong elements\n",
            w, failed, runs, n, bad, tot }'
done
