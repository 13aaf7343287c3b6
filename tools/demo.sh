#!/usr/bin/env bash
# The README's demo command: installs what a fresh Debian 12 machine lacks, builds and runs the
# decode demo (61 layers through the graph set, checked against the CPU reference). Without a
# GPU it says so and runs the CPU reference over one small step. Flags go to the demo:
#   tools/demo.sh --heads=64 --q=2 --steps=100
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
exec bazel run //demo:decode_demo -- "$@"
