#!/usr/bin/env bash
# Fails when the committed CMake target list differs from the one generated from the Bazel
# targets: the two builds must compile the same files with the same flags.
#   targets_test.sh COMMITTED GENERATED
if ! diff -u "$1" "$2"; then
  echo "cmake/targets.cmake differs from the Bazel targets: run tools/update_cmake_targets.sh" >&2
  exit 1
fi
