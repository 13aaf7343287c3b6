#!/usr/bin/env bash
# Formats every C++ and CUDA source in place with .clang-format.
set -euo pipefail
cd "$(dirname "$0")/.."
git ls-files '*.h' '*.cc' '*.cu' '*.cuh' | xargs clang-format -i
