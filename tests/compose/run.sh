#!/bin/bash
# The compose deployment, for real (issue 37): builds the one image, brings the stack of
# deploy/docker-compose.yml up with Docker's engine, uses it from the host's pan with a
# key of its own, and drives the whole chain inside the containers with the real agent
# CLI against the scripted model (tests/model, through ANTHROPIC_BASE_URL):
#   a review that blocks, a fix, a review that opens the gate, `pan approve`, the
#   test-agent in its sandbox (`network: isolated`), the merge pushed over http with a
#   token to a remote the containers reach (git http-backend behind basic auth);
# then the broker killed with a task queued (a crash restarts it; `docker kill` is a stop
# by hand, `up -d` brings it back) and nothing lost, `down` / `up` keeping the state, and
# no layer of either stage holding a secret of deploy/.env or the .git directory.
#
#   usage: tests/compose/run.sh [BIN_DIR]      (BIN_DIR: the host's pan, default build/bin)
#
# On a clean Debian 12 machine it installs docker.io, docker-compose and debootstrap when
# missing (apt-get, as root), starts dockerd when nothing answers (and stops it at the
# end), and makes the base image debian:bookworm (and -slim) with debootstrap from the
# mirror apt uses, with the machine's extra CA certificates, when it is missing. The
# image and the build cache are kept between runs; the containers, networks and volumes
# of the run are removed at the end, also on failure. Ports are free ones, and the compose
# project's name is the run's own, so it never collides with another stack.
# Compose v1 (docker-compose, Debian's) is used when present, else v2 (docker compose).
set -euo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${1:-$SRC/build/bin}
W=$(mktemp -d /tmp/cloister-compose-XXXXXX)
P=cloister-ci-$$
STARTED_DOCKERD=
CANARY_ENV=
failures=0

say() { printf '\n== %s\n' "$*"; }
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    failures=$((failures + 1))
}
check() { # check WHAT COMMAND...: a failed command is a failed check
    local what=$1
    shift
    if "$@"; then printf 'ok: %s\n' "$what"; else fail "$what"; fi
}
die() {
    printf 'FAIL (cannot go on): %s\n' "$*" >&2
    exit 1
}

# ---- what the machine needs ------------------------------------------------------------
need_packages() {
    local missing=()
    command -v docker >/dev/null || missing+=(docker.io)
    command -v docker-compose >/dev/null || docker compose version >/dev/null 2>&1 ||
        missing+=(docker-compose)
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    command -v git >/dev/null || missing+=(git)
    command -v curl >/dev/null || missing+=(curl)
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "$(id -u)" = 0 ] || die "missing ${missing[*]}, and only root can install them"
    say "installing ${missing[*]}"
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
}

start_dockerd() {
    docker info >/dev/null 2>&1 && return 0
    [ "$(id -u)" = 0 ] || die "no Docker engine answers, and only root can start one"
    say "starting dockerd (no engine answered)"
    dockerd >"$W/dockerd.log" 2>&1 &
    STARTED_DOCKERD=$!
    for _ in $(seq 60); do
        docker info >/dev/null 2>&1 && return 0
        sleep 1
    done
    cat "$W/dockerd.log" >&2
    die "dockerd did not answer within 60 s"
}

# The mirror apt uses (sources.list, or deb822 .sources).
debian_mirror() {
    local m
    m=$(grep -hsE '^deb +(\[[^]]*\] +)?https?://' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
        awk '{for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' | head -n1)
    [ -n "$m" ] || m=$(grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | head -n1)
    [ -n "$m" ] || die "cannot tell which Debian mirror apt uses (no deb line, no URIs: in /etc/apt)"
    echo "$m"
}

base_image() {
    docker image inspect debian:bookworm >/dev/null 2>&1 &&
        docker image inspect debian:bookworm-slim >/dev/null 2>&1 && return 0
    [ "$(id -u)" = 0 ] || die "no debian:bookworm image, and only root can debootstrap one"
    local mirror root
    mirror=$(debian_mirror)
    root=$W/rootfs
    say "making debian:bookworm with debootstrap from $mirror"
    debootstrap --variant=minbase bookworm "$root" "$mirror" >"$W/debootstrap.log" 2>&1 ||
        { tail -n 30 "$W/debootstrap.log" >&2; die "debootstrap failed"; }
    # A TLS-inspecting proxy's CA (npm fails without it); the image's ca-certificates
    # package picks these up when it is installed.
    if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
        mkdir -p "$root/usr/local/share/ca-certificates"
        cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
    fi
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -c . | docker import - debian:bookworm >/dev/null
    docker tag debian:bookworm debian:bookworm-slim
    rm -rf "$root"
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ---- the stack -------------------------------------------------------------------------
if command -v docker-compose >/dev/null; then COMPOSE=(docker-compose); else COMPOSE=(docker compose); fi
dc() {
    "${COMPOSE[@]}" -p "$P" --env-file "$W/ci.env" -f "$SRC/deploy/docker-compose.yml" \
        -f "$SRC/tests/compose/ci.yml" "$@"
}

cleanup() {
    local code=$?
    set +e
    if [ -f "$W/ci.env" ] && docker info >/dev/null 2>&1; then
        if [ "$code" != 0 ] || [ "$failures" != 0 ]; then
            say "the services' logs (last lines)"
            dc logs --no-color --tail=40 >&2 2>/dev/null
        fi
        dc down -v --remove-orphans >/dev/null 2>&1
    fi
    [ -n "$CANARY_ENV" ] && rm -f "$CANARY_ENV"
    if [ -n "$STARTED_DOCKERD" ]; then
        kill "$STARTED_DOCKERD" 2>/dev/null
        wait "$STARTED_DOCKERD" 2>/dev/null
    fi
    rm -rf "$W"
    exit "$code"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# The container of a service (its first replica).
cid() { dc ps -q "$1" | head -n1; }

# Waits until every container of the stack's running services is healthy (those with a
# healthcheck) or running, up to $1 seconds.
wait_healthy() {
    local deadline=$(($(date +%s) + $1)) id state pending
    while :; do
        pending=
        for id in $(dc ps -q); do
            state=$(docker inspect -f '{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}' "$id")
            case "$state" in "running healthy" | "running ") ;; *) pending="$pending $id:$state" ;; esac
        done
        [ -z "$pending" ] && return 0
        [ "$(date +%s)" -ge "$deadline" ] && { echo "not healthy:$pending" >&2; return 1; }
        sleep 2
    done
}

need_packages
start_dockerd
base_image

# The user who owns the workspaces and whose uid the services run as: this one, or, when
# the CI runs as root, uid 10001 (the image's default), as which the host's git and pan are
# run too (setpriv), as a user who is not root would.
if [ "$(id -u)" = 0 ]; then
    CI_UID=10001
    CI_GID=10001
    AS_USER=(setpriv --reuid="$CI_UID" --regid="$CI_GID" --clear-groups env HOME="$W/host/home")
else
    CI_UID=$(id -u)
    CI_GID=$(id -g)
    AS_USER=(env HOME="$W/host/home")
fi
ugit() { "${AS_USER[@]}" git "$@"; }
# Writes stdin to a file of the user's.
ufile() {
    cat >"$1"
    [ "$(id -u)" != 0 ] || chown "$CI_UID:$CI_GID" "$1"
}
PORT_IN=$(free_port)
PORT_EVENTS=$(free_port)
PORT_CONTROL=$(free_port)
PORT_WEB=$(free_port)
TOKEN=ci-token-$RANDOM$RANDOM$RANDOM
API_KEY=sk-ant-scripted-model-$RANDOM$RANDOM
mkdir -p "$W/work" "$W/model" "$W/remote" "$W/host/home"
chmod 0755 "$W"
cp "$SRC/tests/compose/scenario.json" "$W/model/scenario.json"
[ "$(id -u)" != 0 ] || chown -R "$CI_UID:$CI_GID" "$W/work" "$W/model" "$W/remote" "$W/host"

# The settings, as deploy/.env.example has them (the user's own deploy/.env is never
# read nor changed: --env-file).
cat >"$W/ci.env" <<EOF
CLOISTER_UID=$CI_UID
CLOISTER_GID=$CI_GID
CLOISTER_WORKSPACES=$W/work
ANTHROPIC_API_KEY=$API_KEY
INSTALL_CLAUDE=1
CLAUDE_CODE_VERSION=2.1.330
EXTRA_PACKAGES=make python3
CLOISTER_HOST_IN_PORT=$PORT_IN
CLOISTER_HOST_EVENTS_PORT=$PORT_EVENTS
CLOISTER_HOST_CONTROL_PORT=$PORT_CONTROL
CLOISTER_HOST_WEB_PORT=$PORT_WEB
CLOISTER_GIT_TOKEN=$TOKEN
CLOISTER_CI_SOURCE=$SRC
CLOISTER_CI_DIR=$W
EOF

# ---- 2. the image: no secret in any layer ----------------------------------------------
# A deploy/.env with a secret in it, as a user has one, while the image is built (unless
# the user has one: then its own values are looked for).
SECRETS=()
if [ -e "$SRC/deploy/.env" ]; then
    while IFS='=' read -r key value; do
        case "$key" in *KEY* | *TOKEN* | *SECRET*) [ ${#value} -ge 8 ] && SECRETS+=("$value") ;; esac
    done <"$SRC/deploy/.env"
else
    CANARY_ENV=$SRC/deploy/.env
    CANARY=sk-ant-canary-$RANDOM$RANDOM$RANDOM
    printf 'ANTHROPIC_API_KEY=%s\nCLOISTER_GIT_TOKEN=%s-git\n' "$CANARY" "$CANARY" >"$CANARY_ENV"
    SECRETS+=("$CANARY")
fi

say "building the image (${COMPOSE[*]} build; cached layers are reused)"
start=$(date +%s)
built=0
dc build --force-rm broker >"$W/build.log" 2>&1 || built=$?
grep -E '^Step [0-9]+/[0-9]+ : (FROM|RUN)|Using cache|Successfully tagged' "$W/build.log" | cut -c1-120 || true
[ "$built" = 0 ] || { tail -n 40 "$W/build.log" >&2; die "the image did not build"; }
echo "built in $(($(date +%s) - start)) s"
# The build stage, from the same cache, to look into it too.
docker build -q --force-rm -f "$SRC/deploy/Dockerfile" --target build -t cloister-build-stage:latest "$SRC" >/dev/null ||
    die "the build stage did not build"
[ -n "$CANARY_ENV" ] && rm -f "$CANARY_ENV" && CANARY_ENV=

printf '%s\n' "${SECRETS[@]}" >"$W/secrets"
check "no layer of either stage holds a deploy/.env secret" \
    sh -c '! docker save cloister:latest cloister-build-stage:latest | grep -a -q -F -f "$1"' sh "$W/secrets"
check "docker history holds no deploy/.env secret" \
    sh -c '! docker history --no-trunc cloister:latest | grep -q -F -f "$1"' sh "$W/secrets"
check "the build stage has no .git and no deploy/.env" \
    docker run --rm --entrypoint sh cloister-build-stage:latest -c '! [ -e /src/.git ] && ! [ -e /src/deploy/.env ]'

# ---- 1. the sandbox in a container, with the compose file's own options -----------------
# The options of the specialists' anchor (security_opt, cap_add), read from the file, so the
# check follows the file as it is; every attack of tests/sandbox/container_check.sh (caps,
# secrets, host sockets, the bus's loopback, host /tmp) must be refused, as the image's
# user and as root.
mapfile -t SANDBOX_OPTS < <(python3 - "$SRC/deploy/docker-compose.yml" <<'PY'
import sys, yaml
spec = yaml.safe_load(open(sys.argv[1]))["x-specialist"]
for opt in spec.get("security_opt", []):
    print("--security-opt"); print(opt)
for cap in spec.get("cap_add", []):
    print("--cap-add"); print(cap)
PY
)
check "code under test is isolated in the image with the compose file's options" \
    "$SRC/tests/sandbox/container_check.sh" cloister:latest "${SANDBOX_OPTS[@]}"

# ---- 7. the image's details --------------------------------------------------------------
check "no EBADENGINE while installing the agent CLI" sh -c "! grep -q EBADENGINE '$W/build.log'"
# (the Dockerfile installs it with npm --engine-strict: a Node it does not support fails the
# build; here the CLI's own "engines" against the image's node, also when cached)
check "the agent CLI's engines accept the image's Node" docker run --rm --entrypoint node cloister:latest -e '
    const want = require("/opt/claude/lib/node_modules/@anthropic-ai/claude-code/package.json").engines.node;
    const min = /^>=\s*(\d+)/.exec(want);
    process.exit(min && +process.versions.node.split(".")[0] >= +min[1] ? 0 : 1);'
check "the agent CLI is the pinned one, on Node >= 22" docker run --rm --entrypoint sh cloister:latest -c \
    'claude --version | grep -q "^2.1.330 " && node -e "process.exit(+process.versions.node.split(\".\")[0] >= 22 ? 0 : 1)"'
check "the services run as CLOISTER_UID=$CI_UID" \
    sh -c "[ \"\$(docker run --rm --entrypoint id cloister:latest -u)\" = $CI_UID ]"
# Root's uid (CLOISTER_UID=$(id -u) as root) builds, and another uid rebuilds only the
# layers after the user: apt, node and the CLI come from the cache.
uid_log=$W/uid-build.log
docker build --force-rm -f "$SRC/deploy/Dockerfile" --build-arg CLOISTER_UID=0 --build-arg CLOISTER_GID=0 \
    --build-arg EXTRA_PACKAGES="make python3" --build-arg INSTALL_CLAUDE=1 \
    -t cloister-uid-check:latest "$SRC" >"$uid_log" 2>&1 || die "the build with another uid failed"
check "CLOISTER_UID=0 builds, the services' user then has uid 0" \
    sh -c "[ \"\$(docker run --rm --entrypoint id cloister-uid-check:latest -u)\" = 0 ]"
check "another CLOISTER_UID reuses the apt and agent CLI layers" \
    sh -c "grep -A2 'apt-get update' '$uid_log' | grep -q 'Using cache' && grep -A2 'INSTALL_CLAUDE\" = 1' '$uid_log' | grep -q 'Using cache'"
docker rmi -f cloister-uid-check:latest >/dev/null 2>&1 || true

# ---- the stack up, and the host's pan with a key of its own (3) -------------------------
say "bringing the stack up (project $P, host ports $PORT_IN-$PORT_CONTROL, web $PORT_WEB)"
# The user's repository (the workspaces' owner is CLOISTER_UID), and the remote.
REPO=$W/work/project
export GIT_AUTHOR_NAME=CI GIT_AUTHOR_EMAIL=ci@example.com GIT_COMMITTER_NAME=CI GIT_COMMITTER_EMAIL=ci@example.com
ugit init -q -b main "$REPO"
ufile "$REPO/Makefile" <<'EOF'
test:
	@sh test.sh
EOF
ufile "$REPO/calc.sh" <<'EOF'
#!/bin/sh
add() { echo $(( $1 + $2 )); }
EOF
ufile "$REPO/test.sh" <<'EOF'
. ./calc.sh
[ "$(add 2 3)" = 5 ] && echo "1 passed" || { echo "1 failed: add 2 3"; exit 1; }
EOF
ugit -C "$REPO" add -A && ugit -C "$REPO" commit -q -m "calc: add"
ugit init -q --bare -b main "$W/remote/project.git"
ugit -C "$REPO" push -q "$W/remote/project.git" main
ugit -C "$REPO" remote add origin http://git:8080/project.git

dc up -d 2>&1 | tail -n 20
wait_healthy 180 || die "the stack did not become healthy"
check "hooks has a healthcheck, and it passes" \
    sh -c "[ \"\$(docker inspect -f '{{.State.Health.Status}}' $(cid hooks))\" = healthy ]"

# The host's pan: a client key of its own (a submitter), the broker's public key, the
# dashboard's token, in a state directory of its own (deploy/README.md).
HH=$W/host/panopticon
mkdir -p "$HH/keys" && chmod 0700 "$HH" "$HH/keys"
dc exec -T broker pan keys add host --role submitter
dc exec -T broker pan reload >/dev/null
dc exec -T broker cat /var/lib/cloister/keys/clients/host_secret >"$HH/keys/host_secret"
dc exec -T broker cat /var/lib/cloister/keys/broker >"$HH/keys/broker"
dc exec -T web cat /var/lib/cloister/web.token >"$HH/web.token"
echo "$PORT_WEB" >"$HH/web.port"
chmod 0600 "$HH/keys/host_secret" "$HH/web.token"
[ "$(id -u)" != 0 ] || chown -R "$CI_UID:$CI_GID" "$HH"
hpan() {
    "${AS_USER[@]}" PANOPTICON_HOME="$HH" CLOISTER_CURVE=1 CLOISTER_CURVE_CERT="$HH/keys/host_secret" \
        CLOISTER_IN="tcp://127.0.0.1:$PORT_IN" CLOISTER_EVENTS="tcp://127.0.0.1:$PORT_EVENTS" \
        CLOISTER_CONTROL="tcp://127.0.0.1:$PORT_CONTROL" "$BIN/pan" "$@"
}
host_status() {
    for _ in 1 2 3 4 5; do
        hpan status >/dev/null 2>&1 && return 0
        sleep 1
    done
    hpan status
}
check "the host's pan answers with its own key" host_status
check "the host has no broker_secret" test ! -e "$HH/keys/broker_secret"
url=$(hpan web url)
check "pan web url on the host names the published port and the token" \
    sh -c "case '$url' in http://127.0.0.1:$PORT_WEB/\#token=?*) exit 0 ;; *) exit 1 ;; esac"
check "the dashboard answers on the host" curl -fsS -o /dev/null "http://127.0.0.1:$PORT_WEB/"

# ---- 4. pan doctor under CURVE -----------------------------------------------------------
hpan doctor >"$W/doctor-host.txt" 2>&1 || true
check "pan doctor on the host reaches the broker" grep -q "broker .*answers on" "$W/doctor-host.txt"
dc exec -T test-agent pan doctor >"$W/doctor-test.txt" 2>&1 || true
check "pan doctor in the test-agent's container reaches the broker" grep -q "broker .*answers on" "$W/doctor-test.txt"

# ---- the chain ------------------------------------------------------------------------
say "the chain: review (blocks), fix, review (opens), approve, tests, merge pushed"
ugit -C "$REPO" checkout -q -b feature
ufile "$REPO/calc.sh" <<'EOF'
#!/bin/sh
add() { echo $(( $1 + $2 )); }
run() { eval "$1"; }
EOF
ugit -C "$REPO" commit -q -am "calc: run"
hpan submit review-agent --id review-1 --workspace "$REPO" --branch feature --target main \
    --issue CI-1 --title "calc: run" --wait --wait-timeout 300 >"$W/review-1.txt" 2>&1 || true
hpan task show review-1 --json >"$W/review-1.json" 2>&1 || true
check "the first review blocks the gate" grep -q '"CHANGES_REQUESTED"' "$W/review-1.json"
set +e
hpan approve --task review-1 >"$W/approve-1.txt" 2>&1
code=$?
set -e
check "pan approve of the blocked review is refused (exit 6)" test "$code" = 6

# The fix: the branch no longer evaluates its input.
ufile "$REPO/calc.sh" <<'EOF'
#!/bin/sh
add() { echo $(( $1 + $2 )); }
EOF
printf 'more\n' | ufile "$REPO/NEWS"
ugit -C "$REPO" add -A && ugit -C "$REPO" commit -q -m "calc: no eval"
hpan submit review-agent --id review-2 --workspace "$REPO" --branch feature --target main \
    --issue CI-1 --title "calc: run, fixed" --wait --wait-timeout 300 >"$W/review-2.txt" 2>&1 || true
hpan task show review-2 --json >"$W/review-2.json" 2>&1 || true
check "the second review opens the gate" grep -q '"APPROVED"' "$W/review-2.json"

# The test-agent, sandboxed: the branch's tests run with no network.
hpan submit test-agent --id tests-1 --workspace "$REPO" --branch feature --wait \
    --wait-timeout 300 >"$W/tests-1.txt" 2>&1 || true
hpan task show tests-1 --json >"$W/tests-1.json" 2>&1 || true
check "the branch's tests pass in the test-agent" grep -q '"TEST_RESULT": *"PASS"' "$W/tests-1.json"
# Issue 37 section 1: bwrap must work in the container (common/agent/sandbox.c).
check "the test-agent's run is sandboxed (network: isolated)" grep -q '"network": *"isolated' "$W/tests-1.json"

ugit -C "$REPO" checkout -q main
hpan approve --task review-2 --wait --wait-timeout 300 >"$W/approve-2.txt" 2>&1 || true
hpan task show merge-review-2 --json >"$W/merge.json" 2>&1 || true
check "the merge succeeded" grep -q '"MERGE_RESULT": *"SUCCESS"' "$W/merge.json"
remote_main=$(ugit --git-dir="$W/remote/project.git" rev-parse main)
feature=$(ugit -C "$REPO" rev-parse feature)
check "the merge was pushed over http with the token" \
    ugit --git-dir="$W/remote/project.git" merge-base --is-ancestor "$feature" "$remote_main"
# 8: the merged files in the user's checkout have git's modes, not the services' 0600.
check "the user's checkout moved with the merge" test -e "$REPO/NEWS"
check "a merged file has mode 0644 in the user's checkout" \
    sh -c "[ \"\$(stat -c %a '$REPO/NEWS')\" = 644 ]"

# 8: a repository owned by another uid (root's, when the CI runs as root): the real cause,
# and its tests never run in the user's checkout.
if [ "$(id -u)" = 0 ]; then
    FOREIGN=$W/work/foreign
    mkdir -p "$FOREIGN"
    printf 'test:\n\t@touch ran-in-the-checkout; echo "1 passed"\n' >"$FOREIGN/Makefile"
    git -C "$FOREIGN" init -q && git -C "$FOREIGN" add -A && git -C "$FOREIGN" commit -q -m init
    hpan submit test-agent --id foreign-1 --workspace "$FOREIGN" --wait --wait-timeout 120 \
        >"$W/foreign.txt" 2>&1 || true
    hpan task show foreign-1 --json >>"$W/foreign.txt" 2>&1 || true
    check "another uid's repository: git's ownership check is named" \
        grep -q "git refuses the repository at $FOREIGN" "$W/foreign.txt"
    check "another uid's repository: nothing ran in the user's checkout" \
        test ! -e "$FOREIGN/ran-in-the-checkout"
fi

# ---- a queued task survives the broker's death --------------------------------------------
say "the broker killed with a task queued"
dc stop test-agent >/dev/null 2>&1
hpan submit test-agent --id queued-1 --workspace "$REPO" --branch feature >/dev/null
# A crash (the broker process killed): Docker restarts it (restart: unless-stopped).
broker=$(cid broker)
restarts=$(docker inspect -f '{{.RestartCount}}' "$broker")
docker exec "$broker" sh -c 'kill -9 $(cat /proc/1/task/1/children)'
check "a crashed broker is restarted by the engine" sh -c "for i in \$(seq 60); do
    [ \"\$(docker inspect -f '{{.RestartCount}} {{.State.Running}}' $broker)\" = '$((restarts + 1)) true' ] && exit 0; sleep 1; done; exit 1"
# `docker kill` is a stop by hand: Docker does not restart it; `up -d` does.
docker kill "$broker" >/dev/null
sleep 2
check "docker kill leaves the broker down (Docker's rule for a stop by hand)" \
    sh -c "[ \"\$(docker inspect -f '{{.State.Running}}' $broker)\" = false ]"
dc up -d 2>&1 | tail -n 5
wait_healthy 180 || fail "the stack did not come back after docker kill"
hpan task show queued-1 --json >"$W/queued.json" 2>&1 || true
check "the queued task survived (it is still there)" grep -q '"id": *"queued-1"' "$W/queued.json"
hpan task wait queued-1 --timeout 300 >/dev/null 2>&1 || true
hpan task show queued-1 --json >"$W/queued.json" 2>&1 || true
check "the queued task ran once the test-agent was back" grep -q '"TEST_RESULT": *"PASS"' "$W/queued.json"

# ---- down / up keeps the state ----------------------------------------------------------------
say "down / up"
dc down >/dev/null 2>&1
dc up -d 2>&1 | tail -n 5
wait_healthy 180 || fail "the stack did not come back after down / up"
hpan task show review-2 --json >"$W/after.json" 2>&1 || true
check "down / up keeps the tasks and the host's key" grep -q '"APPROVED"' "$W/after.json"

if [ "$failures" != 0 ]; then
    say "$failures check(s) failed; what the tasks said:"
    for f in "$W"/*.txt "$W"/*.json; do echo "-- $f"; head -c 3000 "$f"; echo; done >&2
    exit 1
fi
say "all checks passed"
