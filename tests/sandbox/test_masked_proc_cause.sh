#!/bin/sh
# test_masked_proc_cause.sh BIN_DIR: where a container masks paths under /proc and bwrap
# has no CAP_SYS_ADMIN (the services as a plain user: the compose image without the
# capabilities docs/security.md names), code under test cannot be isolated; every word
# about it must name that cause and its remedy -- not "install bubblewrap", which is
# installed. Runs `pan tests sandbox` as nobody under masked_proc.sh.
set -eu
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
chown 65534:65534 "$home"
out=$("$here/masked_proc.sh" setpriv --reuid 65534 --regid 65534 --clear-groups \
    env PANOPTICON_HOME="$home/state" HOME="$home" "$bin/pan" tests sandbox -- true 2>&1) || {
    code=$?
    [ $code = 77 ] && exit 77
    echo "pan tests sandbox failed ($code): $out" >&2
    exit 1
}
fail=0
expect() {
    case "$out" in
    *"$1"*) ;;
    *) echo "FAIL: no \"$1\" in: $out" >&2; fail=1 ;;
    esac
}
expect "sandbox none"
expect "NOT ISOLATED"
expect "this container masks paths under /proc (/proc/timer_list)"
expect "cap_add SYS_ADMIN, NET_ADMIN, SYS_PTRACE with bwrap setuid root"
case "$out" in
*"install bubblewrap"*) echo "FAIL: says \"install bubblewrap\": $out" >&2; fail=1 ;;
esac
[ $fail = 0 ] && echo "test_masked_proc_cause: the cause is named: $out"
exit $fail
