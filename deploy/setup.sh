#!/bin/sh
# Installs what Cloister needs (Debian packages only) when something is missing, then
# configures and builds into $BUILD_DIR (default ./build). Safe to run again.
#   usage: deploy/setup.sh [--programs] [extra cmake arguments...]
#
# --programs (what deploy/run-local.sh runs): the packages the programs need, and the
# programs alone built (the CMake target `programs`: pan, cloister-mcp and the services),
# quietly: one line saying what is built, and on a failure the compiler's messages.
# Without it (what tests/run.sh runs): the packages the tests need too, and everything
# built (tests, benchmarks, fuzz targets), with make's output.
set -eu
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
programs_only=0
if [ "${1:-}" = --programs ]; then
    programs_only=1
    shift
fi

# What the programs need to build and run (bubblewrap: the sandbox of a branch's commands).
packages="build-essential cmake pkg-config git libzmq3-dev libczmq-dev libmsgpack-dev \
libgit2-dev libsqlite3-dev libjansson-dev uuid-dev libmicrohttpd-dev libcurl4-openssl-dev \
libsodium-dev bubblewrap logrotate"
# What the tests, benchmarks and soak add.
test_packages="docker-compose python3-zmq python3-msgpack python3-websocket chromium \
libhiredis-dev iproute2 iptables libnetfilter-queue-dev"
[ "$programs_only" -eq 1 ] || packages="$packages $test_packages"
missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# Tools the tests drive, checked by command (node may come from elsewhere than Debian, with
# its own npm): node and npm (the MCP SDK and Claude Code CLI tests), tmux (pan top's test).
if [ "$programs_only" -eq 0 ]; then
    command -v node >/dev/null 2>&1 || missing="$missing nodejs"
    command -v npm >/dev/null 2>&1 || missing="$missing npm"
    command -v tmux >/dev/null 2>&1 || missing="$missing tmux"
fi
if [ -n "$missing" ]; then
    echo "setup: installing$missing"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi

cmake -S . -B "$BUILD_DIR" -DCLOISTER_WERROR=ON "$@" >/dev/null
if [ "$programs_only" -eq 0 ]; then
    cmake --build "$BUILD_DIR" -j "$(nproc)"
    exit 0
fi

echo "setup: building pan, cloister-mcp and the services into $BUILD_DIR/bin"
log="$BUILD_DIR/setup-build.log"
if ! cmake --build "$BUILD_DIR" -j "$(nproc)" --target programs >"$log" 2>&1; then
    # The compiler's and linker's words, without make's progress lines.
    grep -v -E '^\[ *[0-9]+%\] |^g?make(\[[0-9]+\])?: (Entering|Leaving)|^Consolidate compiler generated dependencies' \
        "$log" >&2 || true
    echo "setup: the build failed (all of its output: $log)" >&2
    exit 1
fi
