#!/usr/bin/env bash
# Installs the build's system packages when missing (Debian 12; root or sudo): Bazel 4.2.3,
# Abseil and GoogleTest. The CUDA toolkit is expected at /usr/local/cuda.
set -euo pipefail
packages=(bazel-bootstrap libabsl-dev googletest libgtest-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup: the CUDA toolkit is missing at /usr/local/cuda (nvcc not found)" >&2
  exit 1
fi
