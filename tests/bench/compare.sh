#!/bin/bash
# Cloister's broker beside beanstalkd and Redis, on this machine, in one run (docs/performance.md,
# Benchmarks).
#
# Every side runs the same load over TCP on 127.0.0.1 with PAYLOAD-byte jobs and the same
# job count: put/push/submit -> take -> done, end to end, the clock stopping at the last
# job done. Durable runs (DURABLE_JOBS jobs) pair servers that fsync before they answer:
#   beanstalkd -f 0 (fsync per put and per delete), Redis appendfsync always (one fsync per
#   event-loop pass, before any reply), Cloister sync=full (one fsync per commit, a commit
#   per loop iteration, before any ack or dispatch);
# relaxed runs (RELAXED_JOBS jobs) pair servers that do not:
#   beanstalkd -f 50 (its default: fsync at most every 50 ms), Redis appendfsync everysec,
#   Cloister sync=normal (WAL mode: no fsync on commit at all, only at checkpoints; a
#   process crash loses nothing, a power loss may lose the last commits).
# Clients: bench_broker (64 workers), bench_beanstalkd and bench_redis each twice -- 64
# one-job workers (the same shape) and one connection pipelining 100 takes then 100
# completions (their best client). Each server runs fresh (new directory, a free port) for
# every run; each prints the server's CPU per job (user + system from /proc/PID/stat, over
# the timed window) and its utilisation (that CPU over the wall time, % of one core), and
# the same for the client (the load generator: a client near 100% would be the bottleneck).
# ROUNDS rounds alternate every run; the summary gives medians and spreads (min-max), and
# the ratios: against beanstalkd's faster client, against Redis's 64-worker client (the
# same shape), with the issue-27 targets marked met or missed.
#   usage: tests/bench/compare.sh [BENCH_DIR]   (default: build/bench, the default
#          RelWithDebInfo build). Installs beanstalkd and redis-server from Debian when
#          missing; bench_redis needs libhiredis-dev at build time (deploy/setup.sh).
set -euo pipefail
BENCH=${1:-build/bench}
ROUNDS=${ROUNDS:-3}
DURABLE_JOBS=${DURABLE_JOBS:-20000}
RELAXED_JOBS=${RELAXED_JOBS:-100000}
PAYLOAD=${PAYLOAD:-300}
WORKERS=64
PIPELINE=100
if [ "$DURABLE_JOBS" -lt 10000 ] || [ "$RELAXED_JOBS" -lt 100000 ]; then
    echo "compare: fewer jobs than the comparison's minimum (10,000 durable, 100,000 relaxed):" \
        "a smoke test, not figures to quote" >&2
fi
for program in bench_broker bench_beanstalkd bench_redis; do
    [ -x "$BENCH/$program" ] || {
        echo "compare: $BENCH/$program is missing (run deploy/setup.sh, which installs" \
            "libhiredis-dev, then build)" >&2
        exit 2
    }
done
missing=""
command -v beanstalkd >/dev/null || missing="$missing beanstalkd"
command -v redis-server >/dev/null || missing="$missing redis-server"
command -v python3 >/dev/null || missing="$missing python3"
command -v ss >/dev/null || missing="$missing iproute2"
if [ -n "$missing" ]; then
    echo "compare: installing$missing" >&2
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get install -y -qq $missing >/dev/null ||
        { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq $missing >/dev/null; }
fi

dir=$(mktemp -d)
server_pid=""
stop_server() {
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=""
    fi
}
cleanup() {
    stop_server
    rm -rf "$dir"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Starts a server (its command line, with @port@ for its port) in a fresh data directory,
# $dir/data, and waits until it listens on its port (ss names the listening process, so a
# stranger that took the port since free_port is never measured: the server then fails to
# bind and another port is tried); sets server_pid and port.
start_server() {
    local attempt
    for attempt in 1 2 3 4 5; do
        rm -rf "$dir/data" && mkdir "$dir/data"
        port=$(free_port)
        "${@//@port@/$port}" >"$dir/server.log" 2>&1 &
        server_pid=$!
        local i
        for ((i = 0; i < 100; i++)); do
            kill -0 "$server_pid" 2>/dev/null || break
            if ss -Hltnp "sport = :$port" | grep -q "pid=$server_pid,"; then
                return 0
            fi
            sleep 0.05
        done
        stop_server
    done
    echo "compare: $1 did not start: $(tail -3 "$dir/server.log")" >&2
    exit 1
}

# "jobs/s server_cpu_us_per_job server% client_cpu_us_per_job client%" from a benchmark's
# line.
figures() {
    local number='\([0-9.]*\)' unit='\(job\|task\)'
    sed -n "s/.*= $number \\(jobs\\|tasks\\)\\/s end to end (\\(server\\|broker\\) CPU $number us\\/$unit, $number% of a core) \\[client CPU $number us\\/$unit, $number% of a core\\].*/\\1 \\4 \\6 \\7 \\9/p"
}

declare -A results
# record KEY LINE: keeps the figures of one run and prints the line.
record() {
    local key=$1 line=$2
    local values
    values=$(figures <<<"$line")
    [ -n "$values" ] || { echo "compare: no figures in: $line" >&2; exit 1; }
    results[$key]+="$values"$'\n'
    printf '  %-22s %s\n' "$key" "$line"
}

beanstalk() { # KEY JOBS CLIENT-ARGS -- SERVER-FLAGS
    local key=$1 jobs=$2 client=$3
    shift 4
    start_server beanstalkd -l 127.0.0.1 -p @port@ -b "$dir/data" "$@"
    record "$key" "$("$BENCH/bench_beanstalkd" --port "$port" --pid "$server_pid" --tasks "$jobs" \
        --payload-bytes "$PAYLOAD" $client)"
    stop_server
}

redis() { # KEY JOBS CLIENT-ARGS FSYNC
    local key=$1 jobs=$2 client=$3 fsync=$4
    start_server redis-server --port @port@ --bind 127.0.0.1 --dir "$dir/data" --save '' \
        --appendonly yes --appendfsync "$fsync" --daemonize no --loglevel warning
    record "$key" "$("$BENCH/bench_redis" --port "$port" --pid "$server_pid" --tasks "$jobs" \
        --payload-bytes "$PAYLOAD" $client)"
    stop_server
}

cloister() { # KEY JOBS SYNC
    record "$1" "$("$BENCH/bench_broker" --tcp --payload-bytes "$PAYLOAD" --sync "$3" \
        --tasks "$2" --workers "$WORKERS" --seconds 0)"
}

one_by_one="--workers $WORKERS"
pipelined="--pipeline $PIPELINE"
echo "compare: $ROUNDS rounds; $DURABLE_JOBS jobs durable, $RELAXED_JOBS relaxed;" \
    "$PAYLOAD-byte jobs over TCP loopback; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((round = 1; round <= ROUNDS; round++)); do
    echo "round $round"
    beanstalk "beanstalkd-f0-workers" "$DURABLE_JOBS" "$one_by_one" -- -f 0
    beanstalk "beanstalkd-f0-pipeline" "$DURABLE_JOBS" "$pipelined" -- -f 0
    redis "redis-always-workers" "$DURABLE_JOBS" "$one_by_one" always
    redis "redis-always-pipeline" "$DURABLE_JOBS" "$pipelined" always
    cloister "cloister-full" "$DURABLE_JOBS" full
    beanstalk "beanstalkd-f50-workers" "$RELAXED_JOBS" "$one_by_one" -- -f 50
    beanstalk "beanstalkd-f50-pipeline" "$RELAXED_JOBS" "$pipelined" -- -f 50
    redis "redis-everysec-workers" "$RELAXED_JOBS" "$one_by_one" everysec
    redis "redis-everysec-pipeline" "$RELAXED_JOBS" "$pipelined" everysec
    cloister "cloister-normal" "$RELAXED_JOBS" normal
done

# Column COLUMN (1 jobs/s, 2 server CPU per job, 3 its utilisation, 4 client CPU per job, 5
# its utilisation) of KEY's runs: "median min max".
stat() {
    printf '%s' "${results[$1]}" | awk -v c="$2" 'NF { print $c }' | sort -g |
        awk '{ v[NR] = $1 } END { printf "%s %s %s", v[int((NR + 1) / 2)], v[1], v[NR] }'
}
median() { stat "$1" 1 | cut -d' ' -f1; }

describe() { # KEY DURABILITY
    local rate cpu util client client_util
    read -r -a rate <<<"$(stat "$1" 1)"
    read -r -a cpu <<<"$(stat "$1" 2)"
    read -r -a util <<<"$(stat "$1" 3)"
    read -r -a client <<<"$(stat "$1" 4)"
    read -r -a client_util <<<"$(stat "$1" 5)"
    printf '  %-23s %6s jobs/s (%s-%s)  server %5s us/job (%s-%s) %3s%%  client %5s us/job %3s%%  %s\n' \
        "$1" "${rate[0]}" "${rate[1]}" "${rate[2]}" "${cpu[0]}" "${cpu[1]}" "${cpu[2]}" \
        "${util[0]}" "${client[0]}" "${client_util[0]}" "$2"
}

ratio() { # US THEM TARGET LABEL
    awk -v us="$1" -v them="$2" -v target="$3" -v label="$4" 'BEGIN {
        r = us / them
        printf "  %-52s %5.2fx  (target %sx: %s)\n", label, r, target, (r >= target ? "met" : "MISSED") }'
}

echo
echo "medians of $ROUNDS rounds (spread min-max):"
echo "durable, $DURABLE_JOBS jobs:"
describe beanstalkd-f0-workers "fsync before every reply (each put and delete)"
describe beanstalkd-f0-pipeline "fsync before every reply (each put and delete)"
describe redis-always-workers "AOF fsync per event-loop pass, before replies"
describe redis-always-pipeline "AOF fsync per event-loop pass, before replies"
describe cloister-full "WAL fsync per commit, before acks and dispatches"
echo "relaxed, $RELAXED_JOBS jobs:"
describe beanstalkd-f50-workers "fsync at most every 50 ms"
describe beanstalkd-f50-pipeline "fsync at most every 50 ms"
describe redis-everysec-workers "AOF fsync once a second"
describe redis-everysec-pipeline "AOF fsync once a second"
describe cloister-normal "WAL, sync=normal: no fsync on commit"

best() { # the faster median of two keys
    local a b
    a=$(median "$1") b=$(median "$2")
    [ "$a" -ge "$b" ] && echo "$a" || echo "$b"
}
full=$(median cloister-full) normal=$(median cloister-normal)
echo "ratios (medians):"
ratio "$full" "$(best beanstalkd-f0-workers beanstalkd-f0-pipeline)" 10 \
    "sync=full / beanstalkd -f 0 (faster client)"
ratio "$normal" "$(best beanstalkd-f50-workers beanstalkd-f50-pipeline)" 1.5 \
    "sync=normal / beanstalkd -f 50 (faster client)"
ratio "$full" "$(median redis-always-workers)" 2 "sync=full / Redis always (64 workers)"
ratio "$normal" "$(median redis-everysec-workers)" 1.5 "sync=normal / Redis everysec (64 workers)"
ratio "$full" "$(median redis-always-pipeline)" 2 "sync=full / Redis always (pipelined client)"
ratio "$normal" "$(median redis-everysec-pipeline)" 1.5 \
    "sync=normal / Redis everysec (pipelined client)"
