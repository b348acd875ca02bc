#!/bin/sh
# container_check.sh IMAGE [DOCKER_RUN_OPTION...]
#
# Is code under test isolated in a container of IMAGE run with these options (the compose
# file's, e.g. --security-opt seccomp=unconfined --security-opt apparmor=unconfined
# --cap-add SYS_ADMIN --cap-add NET_ADMIN --cap-add SYS_PTRACE)? In the container, as the
# image's own user and as root (CHECK_USERS="image 0" by default; a uid or uid:gid works
# too), it plants what a branch must not reach -- a key in $PANOPTICON_HOME/keys, ~/.ssh/id_rsa,
# ANTHROPIC_API_KEY in the environment, Unix sockets listening in /run and /var/tmp, a TCP
# listener on 127.0.0.1 (the bus), files in /tmp and /var/tmp -- then runs an attack script
# with `pan tests sandbox` (the sandbox a branch's tests and review checks get) and checks
# that every attempt was refused, from inside and from outside. IMAGE needs pan, bwrap,
# git, perl-base and util-linux (the cloister image has them).
#
# Exit 0: isolated for every user; 1: not (what got through is printed); 2: usage.
set -u
if [ $# -lt 1 ]; then
    echo "usage: $0 IMAGE [DOCKER_RUN_OPTION...]" >&2
    exit 2
fi
image=$1
shift
users=${CHECK_USERS:-image 0}

# The part that runs in the container (sh -c), as the user under test.
inside=$(cat <<'INSIDE'
set -u
fail=0
t=$(mktemp -d /tmp/cc.XXXXXX) && w=$(mktemp -d /var/tmp/cc-work.XXXXXX) || exit 1
export PANOPTICON_HOME="$t/state" HOME="$t/home" CLAUDE_CONFIG_DIR="$t/claude"
export ANTHROPIC_API_KEY=sekrit-api-key-of-the-service
mkdir -p "$PANOPTICON_HOME/keys" "$HOME/.ssh" "$CLAUDE_CONFIG_DIR"
echo sekrit-client-secret > "$PANOPTICON_HOME/keys/client_secret"
echo sekrit-ssh-key > "$HOME/.ssh/id_rsa"
echo sekrit-claude-credentials > "$CLAUDE_CONFIG_DIR/.credentials.json"
echo sekrit-host-tmp > "$t/host-file"
echo sekrit-host-var-tmp > "$w.host-file"
log="$t/connections"
: > "$log"
listen() { # listen unix PATH | listen tcp PORT: records every connection in $log
    perl -MSocket -e '
        my ($kind, $where, $log) = @ARGV;
        if ($kind eq "unix") {
            socket(S, PF_UNIX, SOCK_STREAM, 0) or die; unlink $where;
            bind(S, pack_sockaddr_un($where)) or exit 3; chmod 0777, $where;
        } else {
            socket(S, PF_INET, SOCK_STREAM, 0) or die;
            setsockopt(S, SOL_SOCKET, SO_REUSEADDR, 1);
            bind(S, pack_sockaddr_in($where, inet_aton("127.0.0.1"))) or exit 3;
        }
        listen(S, 8) or die;
        while (accept(C, S)) { open(F, ">>", $log); print F "$kind $where\n"; close F; close C }
    ' "$1" "$2" "$log" &
}
run_sock=/run/cc-$$.sock
if [ -w /run ]; then listen unix "$run_sock"; else run_sock=; fi
listen unix /var/tmp/cc-$$.sock
port=$((20000 + $$ % 20000))
listen tcp $port
listener=$!
sleep 0.5
git -C "$w" init -q
cat > "$w/attack.sh" <<ATTACK
try() { name=\$1; shift; if "\$@" >/dev/null 2>&1; then echo "ATTACK \$name: ESCAPED"; else echo "ATTACK \$name: refused"; fi; }
control() { name=\$1; shift; if "\$@" >/dev/null 2>&1; then echo "CONTROL \$name: ok"; else echo "CONTROL \$name: BROKEN"; fi; }
connect() { perl -MSocket -e 'socket(S, PF_UNIX, SOCK_STREAM, 0) or exit 2; connect(S, pack_sockaddr_un(\$ARGV[0])) or exit 1' "\$1"; }
echo "uid \$(id -u): \$(grep -E '^(CapEff|NoNewPrivs)' /proc/self/status | tr -s '\t\n' '  ')"
try capabilities sh -c "! grep -qE '^CapEff:[[:space:]]+0+\$' /proc/self/status"
try no_new_privs sh -c "! grep -qE '^NoNewPrivs:[[:space:]]+1\$' /proc/self/status"
try remount sh -c 'mount -o remount,rw / 2>/dev/null; mount -o remount,bind,rw / 2>/dev/null; echo x > /etc/cc-probe-$$'
try umount-home sh -c 'cd /; for m in "\$HOME" /tmp /var/tmp $PANOPTICON_HOME; do umount "\$m" || umount -l "\$m"; done; cat $HOME/.ssh/id_rsa $PANOPTICON_HOME/keys/client_secret'
try umount-home-userns unshare -Urm sh -c 'cd /; for m in "\$HOME" /tmp; do umount -l "\$m"; done; cat $HOME/.ssh/id_rsa'
try ssh-key cat $HOME/.ssh/id_rsa
try shadow cat /etc/shadow
try keys cat $PANOPTICON_HOME/keys/client_secret
try claude-credentials cat $CLAUDE_CONFIG_DIR/.credentials.json
try environment sh -c 'env | grep -q sekrit'
try service-environ sh -c 'grep -l sekrit /proc/[0-9]*/environ'
try signal-service kill -0 $listener
try socket-run connect ${run_sock:-/run/cc-none}
try socket-var-tmp connect /var/tmp/cc-$$.sock
try tcp-loopback bash -c 'echo x > /dev/tcp/127.0.0.1/$port'
try network-interfaces sh -c "grep -vqE '^ *(lo:|Inter-|face)' /proc/net/dev"
try read-host-tmp cat $t/host-file
try read-host-var-tmp cat $w.host-file
echo escaped > /tmp/cc-escaped-$$; echo escaped > /var/tmp/cc-escaped-$$
try git-hook sh -c 'echo "echo pwned" > .git/hooks/post-checkout'
control own-tmp sh -c 'echo mine > /tmp/own && grep -q mine /tmp/own'
control own-dir sh -c 'echo mine > own-file && grep -q mine own-file'
control git sh -c 'git status --short >/dev/null'
echo ATTACKS-DONE
ATTACK
out=$(pan tests sandbox --dir "$w" -- sh attack.sh 2>"$t/said")
said=$(cat "$t/said")
echo "$said" | grep '^pan: sandbox'
echo "$out"
case "$said" in
*"pan: sandbox bwrap"*"network isolated"*) ;;
*) echo "NOT ISOLATED: $said"; fail=1 ;;
esac
for word in ESCAPED BROKEN sekrit; do
    case "$out" in *"$word"*) echo "FAIL: the output has $word"; fail=1 ;; esac
done
case "$out" in *ATTACKS-DONE*) ;; *) echo "FAIL: the attack script did not finish"; fail=1 ;; esac
[ "$(echo "$out" | grep -c ': refused$')" = 19 ] || { echo "FAIL: not 19 attacks refused"; fail=1; }
if [ -s "$log" ]; then echo "FAIL: connections arrived: $(cat "$log")"; fail=1; fi
for f in /etc/cc-probe-$$ /tmp/cc-escaped-$$ /var/tmp/cc-escaped-$$ "$w/.git/hooks/post-checkout"; do
    [ -e "$f" ] && { echo "FAIL: the sandbox wrote $f"; fail=1; }
done
[ -z "$run_sock" ] && echo "note: /run is not writable by uid $(id -u): no socket there to try"
kill $(jobs -p) 2>/dev/null
exit $fail
INSIDE
)

status=0
for user in $users; do
    as=
    [ "$user" != image ] && as="--user $user"
    echo "== container_check: $image as ${user} ($*)"
    # shellcheck disable=SC2086 # $as is one option and its value, or nothing
    if docker run --rm $as "$@" --entrypoint /bin/sh "$image" -c "$inside"; then
        echo "== container_check: isolated as ${user}"
    else
        echo "== container_check: NOT isolated as ${user}"
        status=1
    fi
done
exit $status
