#!/usr/bin/env bash
# Copies what a GPU machine needs from a build made here into DEST (default .gpu/build): the
# binaries, the shared libraries, the ctest files and the cache (it records the build's path).
# scripts/gpu-check.sh runs from that copy; carry DEST with the device call.
#   scripts/gpu-bundle.sh [BUILD] [DEST]
set -euo pipefail
build=${1:-build}
dest=${2:-.gpu/build}
rm -rf "$dest"
mkdir -p "$dest"
# Only what a GPU run uses: the GPU tests' programs (from ctest), the tools and the examples (every
# test binary links the whole static library with its kernels: all of them exceed what a device
# call carries).
mkdir -p "$dest/bin"
gpu_progs=$(cd "$build" && ctest -L gpu --show-only=json-v1 | python3 -c '
import json, os, sys
for t in json.load(sys.stdin)["tests"]:
    for a in t.get("command", []):
        if os.path.isfile(a) and os.access(a, os.X_OK): print(os.path.basename(a))' | sort -u)
for f in $gpu_progs "$build"/bin/mscclpp-* "$build"/bin/example_*; do
  f=$(basename "$f")
  [ -e "$build/bin/$f" ] && cp -a "$build/bin/$f" "$dest/bin/"
done
mkdir -p "$dest/lib" && cp -a "$build"/lib/*.so* "$dest/lib/" 2>/dev/null || true
[ -d "$build/lib/nccl" ] && cp -a "$build/lib/nccl" "$dest/lib/" # libnccl.so.2 -> ../libmscclpp_nccl.so
cp "$build/CMakeCache.txt" "$dest/"
(cd "$build" && find . -name CTestTestfile.cmake) | while read -r f; do
  mkdir -p "$dest/$(dirname "$f")" && cp "$build/$f" "$dest/$f"
done
# Host debug info is most of the binaries' size and the device call carries at most 64 MiB:
# strip it from the copy (GPU_BUNDLE_KEEP_DEBUG=1 keeps it).
if [ "${GPU_BUNDLE_KEEP_DEBUG:-0}" != 1 ]; then
  find "$dest/bin" "$dest/lib" -type f \( -perm -u+x -o -name '*.so*' \) -exec strip --strip-debug {} + 2>/dev/null || true
fi
du -sh "$dest"
