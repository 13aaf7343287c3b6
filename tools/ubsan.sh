#!/usr/bin/env bash
# Runs every CPU test (every test not tagged gpu) under UndefinedBehaviorSanitizer: the host code
# (validation, the pointer checks' cache, statuses, buckets, the CPU reference) compiled with
# -fsanitize=undefined, any finding fatal. CUDA sources keep nvcc's flags. Extra arguments go to
# bazel test.
set -euo pipefail
cd "$(dirname "$0")/.."
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
exec bazel test --config=ubsan --test_tag_filters=-gpu --build_tests_only --test_env=UBSAN_OPTIONS "$@" //...
