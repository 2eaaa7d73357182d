#!/usr/bin/env bash
# Assembles, from a CUDA build made here, what gpu_native_check.py needs on a GPU machine that cannot
# build or pip-install the package (the device machines: no registries, no libjansson-dev): the
# package (python/mscclpp, the public headers, libmscclpp with GPU code) and its extension built for
# that machine's Python, in DEST/site (carry DEST, put DEST/site first on PYTHONPATH there).
#   python/tests/native/gpu_bundle.sh BUILD [DEST] [PYTHON]
# BUILD: a build dir configured with CUDA (cmake -S . -B BUILD -DMSCCLPP_BUILD_TESTS=OFF
# -DCMAKE_BUILD_TYPE=Release && cmake --build BUILD --target mscclpp); DEST: default
# .gpu/native-helper (git ignores .gpu/); PYTHON: an interpreter of the GPU machine's Python
# version, for its headers (default python3; the device machines have 3.12).
set -euo pipefail
cd "$(dirname "$0")/../../.."
build=${1:?usage: gpu_bundle.sh BUILD [DEST] [PYTHON]}
dest=${2:-.gpu/native-helper}
py=${3:-python3}
pkg="$dest/site/mscclpp"
rm -rf "$dest"
mkdir -p "$pkg/lib"
cp -r python/mscclpp/. "$pkg/"
find "$pkg" -name __pycache__ -prune -exec rm -rf {} +
cp -r include "$pkg/include"
cp -L "$build/lib/libmscclpp.so.0" "$pkg/lib/libmscclpp.so.0"
cp -L "$build/lib/libmscclpp.so" "$pkg/lib/libmscclpp.so"
strip --strip-debug "$pkg"/lib/*.so*
inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
suffix=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
cc -std=c11 -O2 -Wall -Wextra -Werror -fPIC -shared -D_GNU_SOURCE -Iinclude -I"$inc" python/csrc/*.c \
  -L"$pkg/lib" -l:libmscclpp.so.0 -Wl,-rpath,'$ORIGIN/lib' -o "$pkg/_mscclpp$suffix"
du -sh "$dest"
