#!/usr/bin/env bash
# Fails when a C++ or CUDA source differs from .clang-format (Google style, 100 columns); names
# the files. tools/format.sh rewrites them.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "check_format: clang-format is not installed" >&2
  exit 1
fi
bad=$(git ls-files '*.h' '*.cc' '*.cu' '*.cuh' | while read -r f; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || echo "$f"
done)
if [ -n "$bad" ]; then
  echo "check_format: these files differ from .clang-format (run tools/format.sh):" >&2
  echo "$bad" | sed 's/^/  /' >&2
  exit 1
fi
