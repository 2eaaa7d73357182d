#!/usr/bin/env bash
# install_test.sh BUILD LIBDIR CMAKE CC: `cmake --install BUILD` into a temporary prefix, then what
# a user of the installation does, with neither the source tree nor BUILD in any path:
#   - the layout (headers, libraries, nccl/ links, pkg-config files, CMake package, tools, table);
#   - consumer.c built with `pkg-config --cflags --libs mscclpp` (shared library) and with
#     `pkg-config --static --libs mscclpp` (static library; full link line), nccl_consumer.c with
#     `pkg-config mscclpp_nccl`, and all three with find_package(mscclpp) (tests/install/consumer);
#   - every program runs, and the installed library and tools load <prefix>/share/mscclpp/algo.tsv
#     (the info log of src/algo/select.c says which file); a static program outside the prefix
#     loads no table, never the source tree's.
# LIBDIR is CMAKE_INSTALL_LIBDIR (lib, lib64, ...). Exits 0 on success.
set -euo pipefail
build=$(cd "$1" && pwd -P) libdir=$2 cmake=$3 cc=$4
here=$(cd "$(dirname "$0")" && pwd -P)
src=$(cd "$here/../.." && pwd -P)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mscclpp-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail() { echo "install_test: FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

step "cmake --install $build --prefix $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "cmake --install"; }
prefix=$(cd "$prefix" && pwd -P)
for f in include/mscclpp/mscclpp.h include/mscclpp/core.h include/mscclpp/nccl/nccl.h \
         "$libdir/libmscclpp.so" "$libdir/libmscclpp.so.0" "$libdir/libmscclpp.a" "$libdir/libmscclpp_nccl.so" \
         "$libdir/nccl/libnccl.so.2" "$libdir/nccl/libnccl.so" "$libdir/pkgconfig/mscclpp.pc" \
         "$libdir/pkgconfig/mscclpp_nccl.pc" "$libdir/cmake/mscclpp/mscclppConfig.cmake" \
         "$libdir/cmake/mscclpp/mscclppConfigVersion.cmake" "$libdir/cmake/mscclpp/mscclppTargets.cmake" \
         share/mscclpp/algo.tsv bin/mscclpp-info bin/mscclpp-run bin/mscclpp-perf bin/mscclpp-plan bin/mscclpp-tune; do
  [ -e "$prefix/$f" ] || fail "$f not installed"
done
[ -e "$prefix/include/nccl.h" ] && fail "include/nccl.h installed (it would shadow a real NCCL's)"
[ "$(wc -l <"$build/install_manifest.txt")" -gt 20 ] || fail "install_manifest.txt lists too few files"

# Only the prefix: no build or source tree through the environment.
unset MSCCLPP_ALGO_TABLE MSCCLPP_LOG_FILE LD_LIBRARY_PATH CPATH LIBRARY_PATH
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig CMAKE_PREFIX_PATH=$prefix
export MSCCLPP_LOG_LEVEL=info MSCCLPP_LOG_SUBSYS=algo
table="selection rules from $prefix/$libdir/../share/mscclpp/algo.tsv"

# run LOG EXPECT PROGRAM...: runs it (output in LOG), which must succeed and print EXPECT.
run() {
  local log=$1 want=$2
  shift 2
  local rc=0
  "$@" >"$log" 2>&1 || rc=$?
  [ "$rc" = 0 ] || { cat "$log"; fail "$* exited $rc"; }
  grep -qF -- "$want" "$log" || { cat "$log"; fail "$*: no '$want' in its output"; }
  if grep -qF -- "$src/tuning" "$log"; then cat "$log"; fail "$* read the source tree's table"; fi
}

step "pkg-config: shared library"
pkg-config --exists mscclpp || fail "pkg-config does not find mscclpp"
# shellcheck disable=SC2046
"$cc" -std=c11 -Wall -Wextra -Werror "$here/consumer.c" -o "$tmp/consumer_pc" $(pkg-config --cflags --libs mscclpp)
run "$tmp/pc.log" "consumer: OK" env LD_LIBRARY_PATH="$prefix/$libdir" "$tmp/consumer_pc"
grep -qF "$table" "$tmp/pc.log" || { cat "$tmp/pc.log"; fail "the installed libmscclpp.so did not load the prefix's table"; }
readelf -d "$tmp/consumer_pc" | grep -q 'NEEDED.*libmscclpp.so.0' || fail "consumer_pc does not need libmscclpp.so.0"

step "pkg-config --static: static library"
static_libs=$(pkg-config --static --libs mscclpp)
echo "pkg-config --static --libs mscclpp: $static_libs"
for l in -ljansson -lcrypto -lexpat -ldl -lrt -lm; do
  [[ " $static_libs " == *" $l "* ]] || fail "pkg-config --static --libs mscclpp lacks $l"
done
# The archive by name: with both in the folder, -lmscclpp would pick the shared library. Built into
# the prefix's bin/, as an application installed beside the tools: it reads the prefix's table.
# shellcheck disable=SC2046,SC2001
"$cc" -std=c11 -Wall -Wextra -Werror "$here/consumer.c" -o "$prefix/bin/consumer_static" $(pkg-config --cflags mscclpp) \
  $(echo "$static_libs" | sed 's/-lmscclpp\b/-l:libmscclpp.a/')
readelf -d "$prefix/bin/consumer_static" | grep -q 'NEEDED.*libmscclpp' && fail "consumer_static needs libmscclpp.so"
run "$tmp/static.log" "consumer: OK" "$prefix/bin/consumer_static"
grep -qF "selection rules from $prefix/bin/../share/mscclpp/algo.tsv" "$tmp/static.log" ||
  { cat "$tmp/static.log"; fail "a static program in the prefix's bin/ did not load the prefix's table"; }

step "pkg-config: NCCL API"
# shellcheck disable=SC2046
"$cc" -std=c11 -Wall -Wextra -Werror "$here/nccl_consumer.c" -o "$tmp/nccl_pc" $(pkg-config --cflags --libs mscclpp_nccl)
run "$tmp/nccl.log" "nccl_consumer: OK" env LD_LIBRARY_PATH="$prefix/$libdir/nccl" "$tmp/nccl_pc"

step "installed tools"
run "$tmp/info.log" "Selection table: $prefix/bin/../share/mscclpp/algo.tsv" "$prefix/bin/mscclpp-info"

step "find_package(mscclpp CONFIG)"
"$cmake" -S "$here/consumer" -B "$tmp/cmake" -DCMAKE_C_COMPILER="$cc" >"$tmp/cmake.log" 2>&1 ||
  { cat "$tmp/cmake.log"; fail "configuring tests/install/consumer"; }
grep -q "^mscclpp_DIR:PATH=$prefix/" "$tmp/cmake/CMakeCache.txt" || { grep mscclpp_DIR "$tmp/cmake/CMakeCache.txt"; fail "find_package found another mscclpp"; }
"$cmake" --build "$tmp/cmake" >"$tmp/cmake-build.log" 2>&1 || { cat "$tmp/cmake-build.log"; fail "building tests/install/consumer"; }
run "$tmp/cm-shared.log" "consumer: OK" "$tmp/cmake/consumer_shared" # RUNPATH: CMake's, the prefix's lib/
grep -qF "$table" "$tmp/cm-shared.log" || { cat "$tmp/cm-shared.log"; fail "mscclpp::mscclpp did not load the prefix's table"; }
run "$tmp/cm-static.log" "rules of the built-in table" "$tmp/cmake/consumer_static" # outside the prefix: the compiled-in table
run "$tmp/cm-nccl.log" "nccl_consumer: OK" env LD_LIBRARY_PATH="$prefix/$libdir/nccl" "$tmp/cmake/nccl_consumer"

echo "install_test: OK"
