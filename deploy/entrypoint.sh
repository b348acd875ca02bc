#!/bin/sh
# entrypoint.sh: the container entrypoint of the Cloister image (installed as
# /usr/local/bin/cloister-entrypoint).
#
#   cloister-entrypoint PROGRAM [ARGS...]      (default: cloister-broker)
#
# cloister-broker: binds every endpoint on all interfaces unless CLOISTER_IN /
# CLOISTER_EVENTS / CLOISTER_CONTROL say otherwise (loopback is useless in a container).
#
# A specialist (cloister-review, cloister-test, cloister-merge, cloister-worker) binds its
# task socket on tcp://0.0.0.0:$CLOISTER_PORT (default 7000) and advertises an address the
# broker can reach. The address must belong to THIS container, because with
# `docker compose up --scale merge-agent=2` the service name resolves to every replica. It
# is, in order: $CLOISTER_ADVERTISE (a whole endpoint), tcp://$CLOISTER_ADVERTISE_HOST:port,
# else tcp://<this container's IP>:port (the first address of `hostname -i`), else, when
# that is missing or loopback, tcp://<hostname>:port. --bind / --advertise given as ARGS
# come later and win. Its worker id is $CLOISTER_WORKER_ID, else the container's hostname.
# A specialist that cloister.toml disables ([specialists.NAME] enabled = false) exits 0
# at once, saying so.
set -eu

[ $# -gt 0 ] || set -- cloister-broker
program=$1
shift

case "$program" in
cloister-broker)
    export CLOISTER_IN="${CLOISTER_IN:-tcp://0.0.0.0:5560}"
    export CLOISTER_EVENTS="${CLOISTER_EVENTS:-tcp://0.0.0.0:5561}"
    export CLOISTER_CONTROL="${CLOISTER_CONTROL:-tcp://0.0.0.0:5562}"
    exec "$program" "$@"
    ;;
cloister-review | cloister-test | cloister-merge | cloister-worker)
    port="${CLOISTER_PORT:-7000}"
    case "$port" in '' | *[!0-9]*)
        echo "cloister-entrypoint: CLOISTER_PORT must be a port number, not '$port'" >&2
        exit 2
        ;;
    esac
    advertise="${CLOISTER_ADVERTISE:-}"
    if [ -z "$advertise" ]; then
        host="${CLOISTER_ADVERTISE_HOST:-}"
        if [ -z "$host" ]; then
            host=$(hostname -i 2>/dev/null || true)
            host=${host%% *}
            case "$host" in
            '' | 127.* | ::1) host=$(hostname) ;; # no usable address: the name
            *:*) host="[$host]" ;;                 # IPv6, as ZeroMQ writes it
            esac
        fi
        advertise="tcp://$host:$port"
    fi
    # The container's name is the worker's id, so its healthcheck can ask the broker
    # about it (pan specialists alive "$(hostname)").
    worker_id="${CLOISTER_WORKER_ID:-$(hostname)}"
    # A logged-in Claude config mounted read-only at /run/claude-host lends its
    # credentials to this specialist's own agent state ($CLAUDE_CONFIG_DIR, a volume).
    if [ -n "${CLAUDE_CONFIG_DIR:-}" ] && [ -f /run/claude-host/.credentials.json ]; then
        mkdir -p "$CLAUDE_CONFIG_DIR"
        cp /run/claude-host/.credentials.json "$CLAUDE_CONFIG_DIR/.credentials.json"
    fi
    echo "cloister-entrypoint: $program ($worker_id) binds tcp://0.0.0.0:$port, advertises $advertise" >&2
    exec "$program" --worker-id "$worker_id" --bind "tcp://0.0.0.0:$port" \
        --advertise "$advertise" "$@"
    ;;
*)
    exec "$program" "$@"
    ;;
esac
