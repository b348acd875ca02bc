#!/bin/bash
# Cloister's broker beside beanstalkd, on this machine, in one run (README.md, Benchmarks).
#
# Three rounds, alternating: beanstalkd fsyncing before every reply (-f 0) against Cloister
# sync=full, then beanstalkd with its default binlog sync (every 50 ms) against Cloister
# sync=normal. Both end to end with 300-byte jobs: put -> reserve -> delete by 64 workers
# (bench_beanstalkd) and submit -> dispatch -> result committed by 64 workers
# (bench_broker). Prints each run, then the medians and the ratios.
#   usage: tests/bench/compare.sh [BENCH_DIR]   (default: build/bench; a release build
#          measures the code rather than the debug checks: cmake -DCMAKE_BUILD_TYPE=Release)
set -euo pipefail
BENCH=${1:-build/bench}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-11399}
for program in bench_broker bench_beanstalkd; do
    [ -x "$BENCH/$program" ] || { echo "compare: $BENCH/$program is missing (build first)" >&2; exit 2; }
done
if ! command -v beanstalkd >/dev/null; then
    echo "compare: installing beanstalkd" >&2
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get install -y -qq beanstalkd >/dev/null || { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq beanstalkd >/dev/null; }
fi

dir=$(mktemp -d)
beanstalk_pid=""
cleanup() {
    [ -n "$beanstalk_pid" ] && kill "$beanstalk_pid" 2>/dev/null && wait "$beanstalk_pid" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT

# beanstalkd with a fresh binlog and the given flags; prints jobs/s.
beanstalk() {
    local tasks=$1; shift
    rm -rf "$dir/binlog" && mkdir "$dir/binlog"
    beanstalkd -l 127.0.0.1 -p "$PORT" -b "$dir/binlog" "$@" &
    beanstalk_pid=$!
    sleep 0.3
    "$BENCH/bench_beanstalkd" --port "$PORT" --tasks "$tasks" --workers 64 |
        sed -n 's/.*= \([0-9]*\) jobs\/s.*/\1/p'
    kill "$beanstalk_pid" && wait "$beanstalk_pid" 2>/dev/null || true
    beanstalk_pid=""
}

# Cloister's broker in `sync` mode; prints tasks/s.
cloister() {
    "$BENCH/bench_broker" --sync "$1" --tasks "$2" --workers 64 --seconds 1 2>/dev/null |
        sed -n 's/.*throughput:.*= \([0-9]*\) tasks\/s.*/\1/p'
}

median() { printf '%s\n' "$@" | sort -n | sed -n "$(( ($# + 1) / 2 ))p"; }

durable_b=() durable_c=() relaxed_b=() relaxed_c=()
for ((round = 1; round <= ROUNDS; round++)); do
    durable_b+=("$(beanstalk 5000 -f 0)")
    durable_c+=("$(cloister full 50000)")
    relaxed_b+=("$(beanstalk 50000)")
    relaxed_c+=("$(cloister normal 50000)")
    echo "round $round: durable beanstalkd -f 0 ${durable_b[-1]}/s, Cloister sync=full ${durable_c[-1]}/s;" \
        "relaxed beanstalkd ${relaxed_b[-1]}/s, Cloister sync=normal ${relaxed_c[-1]}/s"
done
db=$(median "${durable_b[@]}") dc=$(median "${durable_c[@]}")
rb=$(median "${relaxed_b[@]}") rc=$(median "${relaxed_c[@]}")
echo "durable (fsync per commit): beanstalkd -f 0 $db jobs/s, Cloister sync=full $dc tasks/s:" \
    "$(awk "BEGIN { printf \"%.1f\", $dc / $db }")x"
echo "relaxed: beanstalkd (binlog every 50 ms) $rb jobs/s, Cloister sync=normal $rc tasks/s:" \
    "$(awk "BEGIN { printf \"%.2f\", $rc / $rb }")x"
