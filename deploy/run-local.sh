#!/usr/bin/env bash
# run-local.sh: runs the whole of Cloister on this machine and supervises it.
#
#   deploy/run-local.sh [--workers N] [--detach] [--no-setup]   start (foreground by default)
#   deploy/run-local.sh stop                                     stop a running instance
#   deploy/run-local.sh status                                   what is running (exit 0: all)
#   deploy/run-local.sh start NAME                               a running supervisor starts
#                                                                specialist NAME now
#
# Start runs deploy/setup.sh --programs (installs the Debian packages if missing and builds
# the programs alone into ./build, quietly), refuses if a broker already answers on the control endpoint, then starts
# cloister-broker, waits until it has bound its endpoints and `pan status` answers, and
# starts N (default 1) each of cloister-review, cloister-test and cloister-merge, except
# those cloister.toml disables ([specialists.<name>] enabled = false), the dashboard
# (cloister-web, on [web] port, loopback by default) and cloister-hooks ([hooks]). It stays in the
# foreground supervising them: a child that exits is restarted after a short backoff (1 s,
# doubling up to 30 s while it keeps dying young). Ctrl-C / SIGTERM stops the specialists,
# then the broker (SIGTERM, wait, then SIGKILL) and exits 0. --detach starts the supervisor
# in the background and returns once everything is started. `status` lists every instance
# and exits 0 only if the supervisor and all of them run. `start NAME` asks the running
# supervisor to start review-agent, test-agent or merge-agent at once: one waiting to be
# restarted is started now, one cloister.toml disabled when the supervisor started is added
# if it is enabled now; it prints what the supervisor did (exit 1 if it refused). The request
# and the answer are files, run/start-NAME.request and run/start-NAME.reply.
#
# State: $PANOPTICON_HOME (default ~/.panopticon; with HOME unset, the home directory the
# password database gives this user): logs/<name>.log, run/<name>.pid, run/supervisor.pid.
# Endpoints: the services read [broker] in/events/control from
# $PANOPTICON_HOME/cloister.toml, overridden by CLOISTER_IN / CLOISTER_EVENTS /
# CLOISTER_CONTROL (default tcp://127.0.0.1:5560/5561/5562); this script only passes the
# environment on.
#
# Start also installs the programs (cmake --install) into /usr/local as root, else ~/.local
# (CLOISTER_PREFIX chooses, CLOISTER_NO_INSTALL=1 skips), so `pan` is on PATH.
#
# Environment: CLOISTER_SKIP_SETUP=1 (same as --no-setup); CLOISTER_BIN_DIR (the built
# programs; default $BUILD_DIR/bin, BUILD_DIR as for deploy/setup.sh, default <repo>/build);
# CLOISTER_STOP_GRACE (whole seconds between SIGTERM and SIGKILL, 0 to 3600, default 10);
# CLOISTER_START_TIMEOUT (whole seconds to wait for the broker, 1 to 3600, default 30).
# Other values are refused before anything is started or stopped.
set -u

say() { printf 'run-local: %s\n' "$*"; }
die() { printf 'run-local: %s\n' "$*" >&2; exit 1; }

# The directory under which the state lives by default: $HOME, or when HOME is unset (cron,
# systemd, env -i) this user's home directory from the password database.
user_home() {
    local home=${HOME:-}
    [ -n "$home" ] || home=$(getent passwd "$(id -u)" 2>/dev/null | cut -d: -f6)
    [ -n "$home" ] || die "HOME is not set and the password database has no home directory for this user; set PANOPTICON_HOME (or HOME)"
    printf '%s\n' "$home"
}

# Prints the value of the setting `name` (whole seconds, from `min` to 3600), or dies
# with a clear error, before anything is started or stopped.
whole_seconds() {
    local name=$1 value=$2 min=$3
    case "$value" in
    '' | *[!0-9]* | ??????*) die "$name must be a whole number of seconds from $min to 3600, not '$value'" ;;
    esac
    if [ $((10#$value)) -lt "$min" ] || [ $((10#$value)) -gt 3600 ]; then
        die "$name must be a whole number of seconds from $min to 3600, not '$value'"
    fi
    printf '%s\n' $((10#$value))
}

# Puts pan, cloister-mcp and the services on PATH with their prompts and pan's bash
# completion (cmake --install): into /usr/local as root, else ~/.local; CLOISTER_PREFIX
# chooses another prefix. The supervisor still runs the programs of the build ($BIN).
install_programs() {
    local prefix=${CLOISTER_PREFIX:-}
    if [ -z "$prefix" ]; then
        if [ "$(id -u)" -eq 0 ]; then prefix=/usr/local; else prefix="$(user_home)/.local"; fi
    fi
    # Installed files are for every user of the machine (the state stays private). What was
    # installed is kept for `uninstall`, from cmake's own lines (the build's manifest file
    # is rewritten by every install, other checkouts' and tests' included).
    local listed
    listed=$(umask 022 && cmake --install "$BUILD_DIR" --prefix "$prefix") ||
        die "cmake --install into $prefix failed (CLOISTER_PREFIX chooses another prefix, CLOISTER_NO_INSTALL=1 skips it)"
    mkdir -p "$PANOPTICON_HOME" &&
        printf '%s\n' "$listed" | sed -n 's/^-- \(Installing\|Up-to-date\): //p' >"$INSTALLED" ||
        die "cannot record what was installed in $INSTALLED"
    say "installed pan, cloister-mcp and the services into $prefix/bin"
    case ":$PATH:" in
    *":$prefix/bin:"*) ;;
    *) say "note: $prefix/bin is not on PATH; add it to run pan" ;;
    esac
}

# Removes what install_programs installed (the files listed in $INSTALLED, and the
# directories of Cloister's own that are left empty); the state in $PANOPTICON_HOME stays.
cmd_uninstall() {
    local file dir pid removed=0
    [ -f "$INSTALLED" ] || die "nothing to uninstall: $INSTALLED does not exist (nothing was installed from this state home)"
    if pid=$(running_supervisor); then
        die "Cloister is running (supervisor pid $pid): run deploy/run-local.sh stop first"
    fi
    while IFS= read -r file; do
        case "$file" in /*) ;; *) continue ;; esac
        if [ -f "$file" ] || [ -L "$file" ]; then
            rm -f "$file" && removed=$((removed + 1))
        fi
        dir=$(dirname "$file")
        case "$dir" in
        */share/cloister | */share/cloister/*) rmdir -p "$dir" 2>/dev/null ;;
        esac
    done <"$INSTALLED"
    rm -f "$INSTALLED"
    say "removed $removed installed files; the state in $PANOPTICON_HOME is kept (remove it with: rm -rf '$PANOPTICON_HOME')"
}

# The state home and everything in it (database, logs, keys, sessions) are this user's
# alone: other users of the machine must not read tasks or reach the bus (the programs set
# the same umask themselves; existing logs are narrowed below).
umask 077
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SELF="$ROOT/deploy/run-local.sh"
if [ -z "${PANOPTICON_HOME:-}" ]; then
    PANOPTICON_HOME="$(user_home)/.panopticon" || exit 1
fi
export PANOPTICON_HOME
BUILD_DIR="${BUILD_DIR:-build}"
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$ROOT/$BUILD_DIR" ;; esac
BIN="${CLOISTER_BIN_DIR:-$BUILD_DIR/bin}"
case "$BIN" in /*) ;; *) BIN="$PWD/$BIN" ;; esac
RUN_DIR="$PANOPTICON_HOME/run"
INSTALLED="$PANOPTICON_HOME/installed-files"
LOG_DIR="$PANOPTICON_HOME/logs"
STOP_GRACE=$(whole_seconds CLOISTER_STOP_GRACE "${CLOISTER_STOP_GRACE:-10}" 0) || exit 1
START_TIMEOUT=$(whole_seconds CLOISTER_START_TIMEOUT "${CLOISTER_START_TIMEOUT:-30}" 1) || exit 1

usage() {
    cat <<'EOF'
usage: deploy/run-local.sh [--workers N] [--detach] [--no-setup]
       deploy/run-local.sh stop | status
       deploy/run-local.sh start NAME
       deploy/run-local.sh restart [--workers N]
       deploy/run-local.sh install | uninstall
Starts cloister-broker and N (default 1) each of cloister-review, cloister-test and
cloister-merge (not those cloister.toml disables with [specialists.<name>] enabled = false)
the dashboard (cloister-web; pan web url prints its address) and cloister-hooks ([hooks] in cloister.toml) under $PANOPTICON_HOME (default ~/.panopticon), restarts any that dies, and stops them all
on Ctrl-C / SIGTERM. --detach runs the supervisor in the background. status exits 0 only
if everything runs. restart stops everything (the specialists first, handing their running
tasks back to the queue, then the broker) and starts it again in the background, without
rebuilding. install puts the programs on PATH without starting anything (as a start does);
uninstall removes what was installed and keeps the state. start NAME (review-agent,
test-agent, merge-agent) has the running supervisor start that specialist now: one waiting
to be restarted, or one disabled at start that cloister.toml enables now.
EOF
}

# True if `pid` is alive and runs exactly `program`, the path we started with no arguments.
# A pid file whose process died and whose number was reused, or one that names a process
# of another build, is not ours: we never signal it.
is_ours() {
    local pid=$1 program=$2 args
    case "$pid" in '' | *[!0-9]*) return 1 ;; esac
    args=$(tr '\0' '\n' 2>/dev/null <"/proc/$pid/cmdline") || return 1
    [ "$args" = "$program" ]
}

# True if `pid` is alive and runs this script (a supervisor, in the foreground or detached).
is_supervisor() {
    local pid=$1 arg
    case "$pid" in '' | *[!0-9]*) return 1 ;; esac
    while IFS= read -r -d '' arg; do
        case "$arg" in run-local.sh | */run-local.sh) return 0 ;; esac
    done 2>/dev/null <"/proc/$pid/cmdline"
    return 1
}

# A pid file holds the pid alone (`kill -HUP $(cat run/broker.pid)` works); the program
# started is beside it, in run/<name>.program.
read_pid() { [ -f "$1" ] && head -n 1 "$1" 2>/dev/null; }

# Removes pid files and the program files beside them.
remove_pid_files() {
    local file
    for file in "$@"; do
        rm -f "$file" "${file%.pid}.program"
    done
}

# The program the pid file `file` was started with (run/<name>.program); without one, the
# program of that instance in $BIN (broker: cloister-broker, review-agent-2:
# cloister-review, ...).
read_program() {
    local file=$1 program
    program=$(head -n 1 "${file%.pid}.program" 2>/dev/null)
    if [ -z "$program" ]; then
        case "$(basename "$file" .pid)" in
        broker) program="$BIN/cloister-broker" ;;
        review-agent*) program="$BIN/cloister-review" ;;
        test-agent*) program="$BIN/cloister-test" ;;
        merge-agent*) program="$BIN/cloister-merge" ;;
        web) program="$BIN/cloister-web" ;;
        hooks) program="$BIN/cloister-hooks" ;;
        esac
    fi
    printf '%s\n' "$program"
}

# True if the process the pid file `file` names is alive and ours.
pid_file_is_ours() { is_ours "$(read_pid "$1")" "$(read_program "$1")"; }

# Sleeps without delaying the signal traps (wait returns as soon as a trapped signal comes).
nap() {
    sleep "$1" &
    local sleeper=$!
    wait "$sleeper" 2>/dev/null
    kill "$sleeper" 2>/dev/null
    wait "$sleeper" 2>/dev/null
}

broker_answers() { "$BIN/pan" --timeout-ms 1000 status >/dev/null 2>&1; }

# Prints the control endpoint if a broker answers there (`pan status`), or fails.
answering_endpoint() {
    local answer
    answer=$("$BIN/pan" --timeout-ms 1000 status 2>/dev/null) || return 1
    printf '%s\n' "$answer" | sed -n '1s/^Broker at //p'
}

file_size() { stat -c %s "$1" 2>/dev/null || echo 0; }

# Prints the specialists cloister.toml disables ([specialists.<name>] enabled = false), one
# a line, as `pan specialists list --json` reports them (pan reads the configuration as the
# services do; the listing has one object per specialist, a key per line). Fails if pan
# does.
disabled_specialists() {
    local listing
    listing=$("$BIN/pan" --timeout-ms 5000 specialists list --json) || return 1
    printf '%s\n' "$listing" | awk '
        /^  \{/ { name = ""; enabled = "" }
        /^    "name": "/ { name = $0; sub(/^    "name": "/, "", name); sub(/",?$/, "", name) }
        /^    "enabled": / { enabled = $2; sub(/,$/, "", enabled) }
        /^  \}/ { if (enabled == "false") print name }'
}

print_next_steps() {
    local pan="$BIN/pan"
    case "$pan" in "$ROOT"/*) pan=${pan#"$ROOT"/} ;; esac
    # The installed pan when it is the one on PATH (install_programs put it there).
    command -v pan >/dev/null 2>&1 && pan=pan
    cat <<EOF

Cloister is running (state and config in $PANOPTICON_HOME, logs in $LOG_DIR).
Next, from $ROOT (with the same PANOPTICON_HOME and CLOISTER_* environment):
  $pan status
  $pan specialists list
  $pan submit test-agent --workspace /path/to/project --title "run the tests"
  $pan events --follow
  $pan web url          (the dashboard, with its token)
Stop it with: deploy/run-local.sh stop${1:+   (or Ctrl-C here)}
EOF
}

# ---- the supervisor -------------------------------------------------------------------

names=()    # instance name, e.g. review-agent or review-agent-2 (logs/<name>.log)
progs=()    # program in $BIN
pids=()     # running pid, or "" while waiting to restart
started=()  # $SECONDS when started
failures=() # consecutive short-lived runs
next_at=()  # $SECONDS when a stopped child may be restarted
stopping=0

# Stops the broker and exits 1 (the broker did not come up, or the start cannot go on).
give_up() {
    stop_children 0
    rm -f "$RUN_DIR/supervisor.pid" "$RUN_DIR/instances"
    exit 1
}

# Adds an instance (also to run/instances, the list `status` reports on).
add_child() {
    printf '%s\n' "$1" >>"$RUN_DIR/instances"
    names+=("$1")
    progs+=("$2")
    pids+=("")
    started+=(0)
    failures+=(0)
    next_at+=(0)
}

start_child() {
    local i=$1
    # setsid: a child of its own, so Ctrl-C on the terminal reaches only the supervisor,
    # which stops the specialists before the broker.
    setsid "$BIN/${progs[i]}" </dev/null >>"$LOG_DIR/${names[i]}.log" 2>&1 &
    pids[i]=$!
    started[i]=$SECONDS
    # The pid file is written once the program runs (until then the process is still the
    # forked shell or setsid), so whoever reads it finds the program it names.
    local tries=0
    while ! is_ours "${pids[i]}" "$BIN/${progs[i]}" && child_runs "$i" && [ "$tries" -lt 100 ]; do
        nap 0.02
        tries=$((tries + 1))
    done
    printf '%s\n' "$BIN/${progs[i]}" >"$RUN_DIR/${names[i]}.program"
    printf '%s\n' "${pids[i]}" >"$RUN_DIR/${names[i]}.pid"
    say "started ${names[i]} (${progs[i]}, pid ${pids[i]}, log $LOG_DIR/${names[i]}.log)"
}

# Notices children that exited and schedules their restart.
reap_children() {
    local i rc ran delay
    for i in "${!names[@]}"; do
        [ -n "${pids[i]}" ] || continue
        kill -0 "${pids[i]}" 2>/dev/null && continue
        wait "${pids[i]}" 2>/dev/null
        rc=$?
        ran=$((SECONDS - started[i]))
        if [ "$ran" -ge 30 ]; then failures[i]=0; fi
        failures[i]=$((failures[i] + 1))
        delay=$((1 << (failures[i] - 1)))
        if [ "$delay" -gt 30 ]; then delay=30; fi
        say "${names[i]} (pid ${pids[i]}) exited with status $rc after ${ran}s; restarting in ${delay}s"
        pids[i]=""
        remove_pid_files "$RUN_DIR/${names[i]}.pid"
        next_at[i]=$((SECONDS + delay))
    done
}

# The answer to `start NAME` (the supervisor's side): starts the instances of specialist
# `name` that wait to be restarted, or adds a specialist cloister.toml disabled at start and
# enables now. Prints "started|running|refused: <what>".
start_on_request() {
    local name=$1 i found=0 started_pids="" disabled n prog
    case "$name" in
    review-agent) prog=cloister-review ;;
    test-agent) prog=cloister-test ;;
    merge-agent) prog=cloister-merge ;;
    *)
        printf 'refused: %s is not a specialist this launcher runs (review-agent, test-agent, merge-agent)\n' "$name"
        return
        ;;
    esac
    for i in "${!names[@]}"; do
        case "${names[i]}" in "$name" | "$name"-[0-9]*) ;; *) continue ;; esac
        found=1
        if [ -z "${pids[i]}" ]; then
            failures[i]=0
            start_child "$i" >&2 # its line goes to the supervisor's log, not the answer
        fi
        started_pids="$started_pids ${pids[i]}"
    done
    if [ "$found" -eq 1 ]; then
        printf 'started: %s runs (pid%s)\n' "$name" "$started_pids"
        return
    fi
    if ! disabled=$(disabled_specialists); then
        printf 'refused: cannot tell whether cloister.toml enables %s (pan specialists list failed)\n' "$name"
        return
    fi
    if printf '%s\n' "$disabled" | grep -qFx "$name"; then
        printf 'refused: %s is disabled in cloister.toml ([specialists.%s] enabled = false)\n' "$name" "$name"
        return
    fi
    sed -i "/^$name disabled\$/d" "$RUN_DIR/instances"
    for ((n = 1; n <= WORKERS; n++)); do
        if [ "$WORKERS" -eq 1 ]; then add_child "$name" "$prog"; else add_child "$name-$n" "$prog"; fi
        start_child $((${#names[@]} - 1)) >&2
        started_pids="$started_pids ${pids[${#names[@]} - 1]}"
    done
    printf 'started: %s runs (pid%s)\n' "$name" "$started_pids"
}

# Answers the `start NAME` requests waiting in run/.
serve_start_requests() {
    local request name
    for request in "$RUN_DIR"/start-*.request; do
        [ -f "$request" ] || continue
        name=$(basename "$request" .request)
        name=${name#start-}
        rm -f "$request"
        start_on_request "$name" >"$RUN_DIR/start-$name.reply.tmp" &&
            mv "$RUN_DIR/start-$name.reply.tmp" "$RUN_DIR/start-$name.reply"
    done
}

restart_children() {
    local i
    for i in "${!names[@]}"; do
        if [ -z "${pids[i]}" ] && [ "$SECONDS" -ge "${next_at[i]}" ]; then
            start_child "$i"
        fi
    done
}

# True while the child with index `i` runs: alive, not a zombie, and still a child of this
# supervisor (so never a process that reused the number of one that exited).
child_runs() {
    local pid=${pids[$1]} stat state ppid
    [ -n "$pid" ] || return 1
    { read -r stat <"/proc/$pid/stat"; } 2>/dev/null || return 1
    read -r state ppid _ <<<"${stat##*) }"
    [ "$state" != Z ] && [ "$ppid" = "$$" ]
}

# Stops the children whose indexes are given: SIGTERM, up to $STOP_GRACE s, then SIGKILL
# to those still running.
stop_children() {
    local i waited=0 alive
    for i in "$@"; do
        child_runs "$i" && kill -TERM "${pids[i]}" 2>/dev/null
    done
    while :; do
        alive=0
        for i in "$@"; do
            child_runs "$i" && alive=1
        done
        if [ "$alive" -eq 0 ] || [ "$waited" -ge $((STOP_GRACE * 10)) ]; then break; fi
        nap 0.1
        waited=$((waited + 1))
    done
    for i in "$@"; do
        [ -n "${pids[i]}" ] || continue
        if child_runs "$i"; then
            say "${names[i]} (pid ${pids[i]}) did not stop within ${STOP_GRACE}s: SIGKILL"
            kill -KILL "${pids[i]}" 2>/dev/null
        fi
        wait "${pids[i]}" 2>/dev/null
        say "stopped ${names[i]}"
        pids[i]=""
        remove_pid_files "$RUN_DIR/${names[i]}.pid"
    done
}

# Says where the broker accepts repositories (its log says so at every start) and how to
# add one: a task for a repository elsewhere is refused at submit.
say_workspace_roots() {
    local roots
    roots=$(grep -F 'workspaces accepted under:' "$LOG_DIR/broker.log" 2>/dev/null | tail -n 1)
    roots=${roots#*workspaces accepted under: }
    [ -n "$roots" ] || return 0
    say "repositories accepted under: $roots"
    say "  to add one: [security] workspace_roots = [\"...\"] in $PANOPTICON_HOME/cloister.toml (or CLOISTER_WORKSPACE_ROOTS=/a:/b), then restart"
}

supervise() {
    local workers=$1 kind name prog n i disabled
    WORKERS=$workers
    trap 'stopping=1' TERM INT HUP
    printf '%s\n' "$$" >"$RUN_DIR/supervisor.pid"
    rm -f "$RUN_DIR/ready" "$RUN_DIR/instances"

    add_child broker cloister-broker
    local log_start deadline=$((SECONDS + START_TIMEOUT))
    log_start=$(file_size "$LOG_DIR/broker.log")
    start_child 0
    # Our broker is up once it has bound its endpoints (its log since it started says
    # "broker up"), answers `pan status` and still runs: a broker of someone else's that
    # answers on the same endpoint while ours fails to bind does not count.
    until tail -c "+$((log_start + 1))" "$LOG_DIR/broker.log" 2>/dev/null | grep -qF 'broker up:' &&
        broker_answers && child_runs 0; do
        if [ "$stopping" -eq 1 ] || ! child_runs 0 || [ "$SECONDS" -ge "$deadline" ]; then
            say "the broker did not come up; the end of $LOG_DIR/broker.log:"
            tail -n 20 "$LOG_DIR/broker.log" 2>/dev/null
            give_up
        fi
        nap 0.2
    done
    say "broker answers (pan status)"
    say_workspace_roots

    if ! disabled=$(disabled_specialists); then
        say "cannot tell which specialists cloister.toml enables (pan specialists list failed)"
        give_up
    fi
    for kind in review:cloister-review test:cloister-test merge:cloister-merge; do
        name="${kind%%:*}-agent"
        prog=${kind#*:}
        if printf '%s\n' "$disabled" | grep -qFx "$name"; then
            say "$name is disabled in cloister.toml ([specialists.$name] enabled = false): not started"
            printf '%s disabled\n' "$name" >>"$RUN_DIR/instances"
            continue
        fi
        for ((n = 1; n <= workers; n++)); do
            if [ "$workers" -eq 1 ]; then
                add_child "$name" "$prog"
            else
                add_child "$name-$n" "$prog"
            fi
            start_child $((${#names[@]} - 1))
        done
    done
    add_child web cloister-web
    start_child $((${#names[@]} - 1))
    add_child hooks cloister-hooks
    start_child $((${#names[@]} - 1))
    : >"$RUN_DIR/ready"
    print_next_steps foreground

    while [ "$stopping" -eq 0 ]; do
        reap_children
        [ "$stopping" -eq 0 ] && serve_start_requests
        [ "$stopping" -eq 0 ] && restart_children
        nap 0.5
    done

    say "stopping"
    local specialists=()
    for ((i = 1; i < ${#names[@]}; i++)); do specialists+=("$i"); done
    [ "${#specialists[@]}" -gt 0 ] && stop_children "${specialists[@]}"
    stop_children 0
    rm -f "$RUN_DIR/ready" "$RUN_DIR/supervisor.pid" "$RUN_DIR/instances"
    say "all stopped"
    exit 0
}

# ---- commands -------------------------------------------------------------------------

# Prints the running supervisor's pid, or fails.
running_supervisor() {
    local pid
    pid=$(read_pid "$RUN_DIR/supervisor.pid") || return 1
    is_supervisor "$pid" || return 1
    printf '%s\n' "$pid"
}

# Stops the processes the given pid files name, if they are still ours: SIGTERM, up to
# $STOP_GRACE s, then SIGKILL to those still running; removes the files.
stop_pid_files() {
    local file name waited=0 alive
    for file in "$@"; do
        if pid_file_is_ours "$file"; then
            name=$(basename "$file" .pid)
            say "stopping leftover $name (pid $(read_pid "$file"))"
            kill -TERM "$(read_pid "$file")" 2>/dev/null
        fi
    done
    while :; do
        alive=0
        for file in "$@"; do
            pid_file_is_ours "$file" && alive=1
        done
        if [ "$alive" -eq 0 ] || [ "$waited" -ge $((STOP_GRACE * 10)) ]; then break; fi
        sleep 0.1
        waited=$((waited + 1))
    done
    for file in "$@"; do
        if pid_file_is_ours "$file"; then
            say "$(basename "$file" .pid) (pid $(read_pid "$file")) did not stop within ${STOP_GRACE}s: SIGKILL"
            kill -KILL "$(read_pid "$file")" 2>/dev/null
        fi
    done
    # A killed process is not gone at once (the kernel still tears down its memory): stop
    # returns only when none is left, so what it reports as stopped is stopped.
    waited=0
    while [ "$waited" -lt 50 ]; do
        alive=0
        for file in "$@"; do
            pid_file_is_ours "$file" && alive=1
        done
        [ "$alive" -eq 0 ] && break
        sleep 0.1
        waited=$((waited + 1))
    done
    remove_pid_files "$@"
}

cmd_stop() {
    local pid file waited=0 specialists=()
    if pid=$(running_supervisor); then
        say "stopping the supervisor (pid $pid)"
        kill -TERM "$pid"
        # The supervisor gives the specialists and then the broker STOP_GRACE each.
        while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt $((2 * STOP_GRACE * 10 + 50)) ]; do
            sleep 0.1
            waited=$((waited + 1))
        done
        if kill -0 "$pid" 2>/dev/null; then
            say "the supervisor did not stop: SIGKILL"
            kill -KILL "$pid" 2>/dev/null
        fi
    else
        say "no supervisor is running"
    fi
    # Children left behind by a supervisor that was killed: the specialists, then the broker.
    for file in "$RUN_DIR"/*.pid; do
        case "$(basename "$file")" in
        supervisor.pid | broker.pid) ;;
        *) [ -f "$file" ] && specialists+=("$file") ;;
        esac
    done
    stop_pid_files "${specialists[@]}"
    stop_pid_files "$RUN_DIR/broker.pid"
    rm -f "$RUN_DIR/ready" "$RUN_DIR/supervisor.pid" "$RUN_DIR/instances"
    say "stopped"
}

# The instances the supervisor started, one a line (run/instances; "<name> disabled" for a
# specialist cloister.toml disables); without that list, those with a pid file.
configured_instances() {
    local file
    if [ -f "$RUN_DIR/instances" ]; then
        cat "$RUN_DIR/instances"
        return
    fi
    for file in "$RUN_DIR"/*.pid; do
        [ -f "$file" ] && [ "$(basename "$file")" != supervisor.pid ] && basename "$file" .pid
    done
}

# One line per configured instance: running (pid), or not running (one that keeps dying is
# not running while it waits to be restarted). Exits 0 only if the supervisor has started
# everything and every instance runs.
cmd_status() {
    local supervisor name state file ok=1
    say "state in $PANOPTICON_HOME"
    if supervisor=$(running_supervisor); then
        say "supervisor running (pid $supervisor)"
        if [ ! -f "$RUN_DIR/ready" ]; then
            ok=0
            say "the supervisor is still starting"
        fi
    else
        supervisor=""
        ok=0
        say "no supervisor is running"
    fi
    while read -r name state; do
        file="$RUN_DIR/$name.pid"
        if [ "$state" = disabled ]; then
            say "$name disabled in cloister.toml (not started)"
        elif pid_file_is_ours "$file"; then
            say "$name running (pid $(read_pid "$file"))"
        elif [ -n "$supervisor" ]; then
            ok=0
            say "$name NOT RUNNING: it exited and waits to be restarted (see $LOG_DIR/$name.log)"
        else
            ok=0
            say "$name not running"
        fi
    done < <(configured_instances)
    [ "$ok" -eq 1 ]
}

# `start NAME`: asks the running supervisor to start specialist NAME now, and prints its
# answer (exit 1 when it refused or did not answer within START_TIMEOUT).
cmd_start_one() {
    local name=$1 pid reply waited=0
    case "$name" in '' | *[!a-z0-9.-]* | -*) die "start: '$name' is not a specialist name" ;; esac
    pid=$(running_supervisor) || die "no supervisor is running: start Cloister first (deploy/run-local.sh --detach)"
    rm -f "$RUN_DIR/start-$name.reply"
    : >"$RUN_DIR/start-$name.request" || die "cannot write $RUN_DIR/start-$name.request"
    while [ ! -f "$RUN_DIR/start-$name.reply" ]; do
        if ! kill -0 "$pid" 2>/dev/null || [ "$waited" -ge $((START_TIMEOUT * 10)) ]; then
            rm -f "$RUN_DIR/start-$name.request"
            die "the supervisor (pid $pid) did not answer within ${START_TIMEOUT}s"
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    reply=$(cat "$RUN_DIR/start-$name.reply")
    rm -f "$RUN_DIR/start-$name.reply"
    case "$reply" in
    started:*) say "${reply#started: }" ;;
    *) die "${reply#refused: }" ;;
    esac
}

cmd_start() {
    local workers=$1 detach=$2 setup=$3 file child pid prog name state endpoint waited=0
    if pid=$(running_supervisor); then
        die "already running (supervisor pid $pid); stop it with: deploy/run-local.sh stop"
    fi
    mkdir -p "$RUN_DIR" "$LOG_DIR" || die "cannot create $RUN_DIR and $LOG_DIR"
    chmod 700 "$PANOPTICON_HOME" "$RUN_DIR" "$LOG_DIR" 2>/dev/null
    chmod 600 "$LOG_DIR"/*.log 2>/dev/null
    # The logs' rotation, for logrotate (deploy/logrotate.conf says how to run it).
    sed "s|@LOG_DIR@|$LOG_DIR|" "$ROOT/deploy/logrotate.conf" >"$PANOPTICON_HOME/logrotate.conf" ||
        die "cannot write $PANOPTICON_HOME/logrotate.conf"
    for file in "$RUN_DIR"/*.pid; do
        [ -f "$file" ] || continue
        child=$(read_pid "$file")
        if [ "$(basename "$file")" != supervisor.pid ] && pid_file_is_ours "$file"; then
            die "$(basename "$file" .pid) (pid $child) still runs from an earlier start; run deploy/run-local.sh stop"
        fi
        remove_pid_files "$file"
    done
    rm -f "$RUN_DIR/instances"
    if [ "$setup" -eq 1 ]; then
        "$ROOT/deploy/setup.sh" --programs || die "deploy/setup.sh failed"
        [ "${CLOISTER_NO_INSTALL:-0}" = 1 ] || install_programs
    fi
    for prog in cloister-broker cloister-review cloister-test cloister-merge cloister-web cloister-hooks pan; do
        [ -x "$BIN/$prog" ] || die "$BIN/$prog is missing (run deploy/setup.sh, or set CLOISTER_BIN_DIR)"
    done
    if endpoint=$(answering_endpoint); then
        die "another broker already answers at ${endpoint:-the control endpoint}; stop it, or give this one other endpoints (CLOISTER_IN, CLOISTER_EVENTS, CLOISTER_CONTROL or [broker] in cloister.toml)"
    fi
    if [ "$detach" -eq 0 ]; then
        supervise "$workers"
    fi

    rm -f "$RUN_DIR/ready"
    CLOISTER_BIN_DIR="$BIN" setsid "$BASH" "$SELF" __supervise "$workers" \
        </dev/null >>"$LOG_DIR/supervisor.log" 2>&1 &
    pid=$!
    while [ ! -f "$RUN_DIR/ready" ]; do
        if ! kill -0 "$pid" 2>/dev/null || [ "$waited" -ge $((START_TIMEOUT * 10 + 50)) ]; then
            say "the supervisor did not start; the end of $LOG_DIR/supervisor.log:"
            tail -n 20 "$LOG_DIR/supervisor.log" 2>/dev/null
            kill -TERM "$pid" 2>/dev/null
            exit 1
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    say "started in the background (supervisor pid $pid, log $LOG_DIR/supervisor.log)"
    while read -r name state; do
        if [ "$state" = disabled ]; then
            say "  $name: disabled in cloister.toml, not started"
        elif pid_file_is_ours "$RUN_DIR/$name.pid"; then
            say "  $name: pid $(read_pid "$RUN_DIR/$name.pid"), log $LOG_DIR/$name.log"
        else
            say "  $name: NOT RUNNING (it exited; see $LOG_DIR/$name.log)"
        fi
    done < <(configured_instances)
    say_workspace_roots
    print_next_steps
}

main() {
    local command=start workers=1 detach=0 setup=1 name=""
    [ "${CLOISTER_SKIP_SETUP:-0}" = 1 ] && setup=0
    while [ $# -gt 0 ]; do
        case "$1" in
        start | stop | status | restart | install | uninstall) command=$1 ;;
        [a-z]*-agent | [a-z]*-agent-[0-9]*)
            [ "$command" = start ] && [ -z "$name" ] || { usage >&2; die "unknown argument '$1'"; }
            name=$1
            ;;
        __supervise)
            [ $# -eq 2 ] || die "internal: __supervise N"
            mkdir -p "$RUN_DIR" "$LOG_DIR" || exit 1
            supervise "$2"
            ;;
        --workers)
            [ $# -ge 2 ] || die "--workers needs a number"
            case "$2" in '' | *[!0-9]*) die "--workers needs a number from 1 to 16, not '$2'" ;; esac
            if [ "${#2}" -gt 4 ] || [ $((10#$2)) -lt 1 ] || [ $((10#$2)) -gt 16 ]; then
                die "--workers needs a number from 1 to 16, not '$2'"
            fi
            workers=$((10#$2))
            shift
            ;;
        --detach | -d) detach=1 ;;
        --no-setup) setup=0 ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument '$1'" ;;
        esac
        shift
    done
    case "$command" in
    stop) cmd_stop ;;
    status) cmd_status ;;
    start)
        if [ -n "$name" ]; then cmd_start_one "$name"; else cmd_start "$workers" "$detach" "$setup"; fi
        ;;
    restart) cmd_stop && cmd_start "$workers" 1 0 ;;
    install) install_programs ;;
    uninstall) cmd_uninstall ;;
    esac
}

main "$@"
