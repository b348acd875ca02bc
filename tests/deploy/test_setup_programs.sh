#!/bin/sh
# test_setup_programs: deploy/run-local.sh on a fresh build directory builds the programs
# it runs and installs (pan, cloister-mcp and the services) and nothing else — no test,
# benchmark, fuzz target or test double — quietly: one line for the build, and on a failure
# the compiler's message instead of make's progress.
#
# The compiler and the linker are stand-ins (CMake's launchers, from the environment): each
# compile records its source and compiles an empty file in its place, each link records its
# output and writes a stub, so the whole build takes seconds and still goes through CMake,
# make and deploy/setup.sh --programs as a user's does. CLOISTER_BIN_DIR names an empty
# directory, so the launcher stops right after its build ("... is missing") and starts
# nothing.
#   usage: test_setup_programs.sh SOURCE_DIR
set -u
src=$(cd "${1:?usage: test_setup_programs.sh SOURCE_DIR}" && pwd) || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$tmp/home" "$tmp/nobin" && : >"$tmp/empty.c" || fail "cannot set up $tmp"
cat >"$tmp/fakecc" <<'CC'
#!/bin/sh
# Compiler launcher: records the source after -c, compiles an empty file in its place.
source=""; prev=""
for a in "$@"; do [ "$prev" = -c ] && source=$a; prev=$a; done
echo "$source" >>"$FAKE_BUILD_LOG"
if [ -n "${FAKE_BUILD_FAIL:-}" ]; then
    case "$source" in *"$FAKE_BUILD_FAIL") echo "$source:7:3: error: planted by the test"; exit 1 ;; esac
fi
n=$#
for a in "$@"; do
    if [ -n "$source" ] && [ "$a" = "$source" ]; then set -- "$@" "$FAKE_BUILD_EMPTY"; else set -- "$@" "$a"; fi
done
shift "$n"
exec "$@"
CC
cat >"$tmp/fakeld" <<'LD'
#!/bin/sh
# Linker launcher: records the program it would link and writes a stub in its place.
out=""; prev=""
for a in "$@"; do [ "$prev" = -o ] && out=$a; prev=$a; done
echo "link $out" >>"$FAKE_BUILD_LOG"
printf '#!/bin/sh\nexit 1\n' >"$out" && chmod +x "$out"
LD
chmod +x "$tmp/fakecc" "$tmp/fakeld" || fail "cannot set up the launchers"

# Runs the launcher as a user would, on the build directory $1; its output in $tmp/out.
run_local() {
    env -u CLOISTER_SKIP_SETUP BUILD_DIR="$1" HOME="$tmp" PANOPTICON_HOME="$tmp/home" \
        CLOISTER_BIN_DIR="$tmp/nobin" CLOISTER_NO_INSTALL=1 \
        CLOISTER_IN="ipc://$tmp/home/in" CLOISTER_EVENTS="ipc://$tmp/home/events" \
        CLOISTER_CONTROL="ipc://$tmp/home/control" \
        CMAKE_C_COMPILER_LAUNCHER="$tmp/fakecc" CMAKE_C_LINKER_LAUNCHER="$tmp/fakeld" \
        FAKE_BUILD_LOG="$tmp/build.log" FAKE_BUILD_EMPTY="$tmp/empty.c" \
        "$src/deploy/run-local.sh" --detach >"$tmp/out" 2>&1
}

# 1. A fresh build directory: only the programs.
run_local "$tmp/build"
status=$?
[ "$status" -eq 1 ] || { cat "$tmp/out"; fail "run-local exited $status, expected 1 (no programs in CLOISTER_BIN_DIR)"; }
grep -q "is missing" "$tmp/out" || { cat "$tmp/out"; fail "run-local did not stop at the missing programs"; }
[ -s "$tmp/build.log" ] || { cat "$tmp/out"; fail "nothing was compiled: the launchers were not used"; }
expected="cloister-broker cloister-hooks cloister-mcp cloister-merge cloister-review cloister-test cloister-web cloister-worker pan"
built=$(ls "$tmp/build/bin" | sort | tr '\n' ' ' | sed 's/ $//')
[ "$built" = "$expected" ] || fail "build/bin holds '$built', expected '$expected'"
linked=$(sed -n 's|^link .*/||p' "$tmp/build.log" | sort | tr '\n' ' ' | sed 's/ $//')
[ "$linked" = "$expected" ] || fail "linked '$linked', expected '$expected'"
if grep -E '(^|/)tests/' "$tmp/build.log" >"$tmp/extra"; then
    fail "compiled test sources: $(head -5 "$tmp/extra" | tr '\n' ' ')"
fi
# Quiet: the build is one line; the rest is the launcher's own stop.
lines=$(grep -c -v 'run-local: ' "$tmp/out")
[ "$lines" -eq 1 ] || { cat "$tmp/out"; fail "the build printed $lines lines, expected 1"; }
grep -q '^setup: building pan, cloister-mcp and the services' "$tmp/out" ||
    { cat "$tmp/out"; fail "no progress line"; }

# 2. A compile that fails: its message, not make's progress.
rm -f "$tmp/build.log"
FAKE_BUILD_FAIL=services/broker/main.c run_local "$tmp/build-broken"
status=$?
[ "$status" -eq 1 ] || { cat "$tmp/out"; fail "a failed build exited $status, expected 1"; }
grep -q 'services/broker/main.c:7:3: error: planted by the test' "$tmp/out" ||
    { cat "$tmp/out"; fail "the compiler's message is not shown"; }
if grep -E '^\[ *[0-9]+%\]' "$tmp/out" >/dev/null; then
    cat "$tmp/out"; fail "make's progress lines are shown"
fi
grep -q 'deploy/setup.sh failed' "$tmp/out" || { cat "$tmp/out"; fail "run-local did not say the build failed"; }
echo "ok: run-local built only $expected, in one line; a failed compile shows its message"
