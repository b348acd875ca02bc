#!/bin/sh
# Sets up, builds and runs the whole test suite (unit, integration, fuzz corpus).
#   usage: tests/run.sh            (build in ./build)
#          BUILD_DIR=build-asan tests/run.sh -DCLOISTER_SANITIZE=ON
set -eu
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
export BUILD_DIR
deploy/setup.sh "$@"

cd "$BUILD_DIR"
ctest --output-on-failure -j 2 --timeout 300
