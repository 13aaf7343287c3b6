#!/usr/bin/env bash
# The README's test command: installs what a fresh Debian 12 machine lacks, then runs every test.
# GPU tests skip without a GPU (and fail instead with MLA_TAIL_REQUIRE_GPU=1).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
bazel test //... "$@"
