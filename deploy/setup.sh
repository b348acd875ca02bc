#!/bin/sh
# Installs what Cloister needs to build (Debian packages only) when something is missing,
# then configures and builds into $BUILD_DIR (default ./build). Safe to run again.
#   usage: deploy/setup.sh [extra cmake arguments...]
set -eu
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}

packages="build-essential cmake pkg-config git libzmq3-dev libczmq-dev libmsgpack-dev \
libgit2-dev libsqlite3-dev libjansson-dev uuid-dev bubblewrap docker-compose python3-zmq \
python3-msgpack python3-websocket libmicrohttpd-dev chromium libhiredis-dev logrotate iproute2 \
iptables libcurl4-openssl-dev libsodium-dev libnetfilter-queue-dev"
missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# Tools the tests drive, checked by command (node may come from elsewhere than Debian, with
# its own npm): node and npm (the MCP SDK and Claude Code CLI tests), tmux (pan top's test).
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
command -v tmux >/dev/null 2>&1 || missing="$missing tmux"
if [ -n "$missing" ]; then
    echo "setup: installing$missing"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi

cmake -S . -B "$BUILD_DIR" -DCLOISTER_WERROR=ON "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
