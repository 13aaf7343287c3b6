#!/usr/bin/env bash
# Installs the build's system packages when missing (Debian 12; root or sudo): Bazel 4.2.3,
# Abseil, GoogleTest and GoogleMock, CMake (for the CMake consumer) and clang-format (tools/check_format.sh). The CUDA toolkit is expected at
# CUDA_PATH, else /usr/local/cuda.
set -euo pipefail
packages=(bazel-bootstrap libabsl-dev googletest libgtest-dev libgmock-dev cmake clang-format)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  # apt and debconf talk on both streams even with -qq; their output is kept in a log that is
  # shown only when the install fails.
  log=$(mktemp)
  echo "setup: installing ${missing[*]}"
  if ! { $sudo apt-get update -qq &&
         $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
           "${missing[@]}"; } >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "setup: installing ${missing[*]} failed" >&2
    exit 1
  fi
  rm -f "$log"
fi
toolkit=${CUDA_PATH:-/usr/local/cuda}
if [ ! -x "$toolkit/bin/nvcc" ]; then
  echo "setup: the CUDA toolkit is missing at $toolkit (nvcc not found; set CUDA_PATH)" >&2
  exit 1
fi
