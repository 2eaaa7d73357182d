#!/usr/bin/env bash
# Installs what building and testing need, from Debian packages only, plus any packages named as
# arguments (make check-builds: clang). Idempotent: does nothing when everything is present. The
# CUDA toolkit is optional (detected by CMake), never installed.
#   scripts/install-deps.sh [PACKAGE...]
set -euo pipefail

# iproute2: the namespace hosts of tests/netns; libfabric-dev: the net transport (optional at build)
packages=(cmake make gcc g++ pkg-config libjansson-dev libexpat1-dev libssl-dev iproute2 libfabric-dev "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
