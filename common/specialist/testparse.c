/* testparse: reading runners' output into counts and failing tests (no processes: the
 * pure half of testrun, and a fuzz target).
 *
 * The parser reads the output once, line by line (ANSI codes and CR removed), and lets
 * every runner's recognisers look at each line: summary lines fill per-runner counters,
 * failure lines add a failing test. Some runners print a failure's reason on a later line
 * (jest, vitest, go, cargo, node's TAP); `want` remembers which failure waits for one and
 * how to find it. At the end one runner's counters are chosen (the first with a summary, in
 * the order pytest, jest/vitest, cargo, ctest, node, go, unittest, then a TAP plan with its
 * ok / not ok lines, then runner-neutral summary lines such as "3 passed, 0 failed").
 *
 * Failures come in two tiers: names from a runner's failure report (pytest's FAILED lines,
 * jest's ●, vitest's FAIL a > b, cargo's ---- x stdout ----, go's --- FAIL, ctest's list,
 * TAP's not ok) and weaker hints (✕ / × list marks, failed go packages), used only when the
 * report named nothing. */
#include "testparse.h"

#include "failure.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define S_LINE_MAX 4096
#define S_MAX_PAIRS 16

typedef struct {
    char *name;
    char *reason;
} s_failure_t;

typedef struct {
    s_failure_t items[TESTRUN_MAX_FAILURES];
    size_t count;
    bool truncated;
} s_failures_t;

typedef enum {
    S_WANT_NONE,
    S_WANT_NEXT_LINE, /* the next non-blank line is the reason (jest, vitest) */
    S_WANT_GO,        /* the next line, if indented under the --- FAIL line */
    S_WANT_CARGO,     /* the panic message under ---- x stdout ---- */
    S_WANT_TAP        /* the `error:` field of the YAML block under not ok */
} s_want_t;

typedef struct {
    long n;
    char word[16];
} s_pair_t;

typedef struct {
    bool pytest, jest, cargo, ctest, tap, go, unittest;
    long py_passed, py_failed, py_skipped;
    long js_passed, js_failed, js_skipped, js_total;
    long cg_passed, cg_failed, cg_ignored;
    long ct_total, ct_failed, ct_skipped;
    long tap_pass, tap_fail, tap_skip;
    bool tap_has_pass, tap_has_fail;
    long go_pass, go_fail, go_skip, go_pkg_ok, go_pkg_fail;
    long ut_run, ut_failed, ut_skipped; /* ut_failed < 0 until the OK / FAILED line */
    long tap_plan; /* a TAP plan's count ("1..N" at the start of a line), -1 without one */
    long tap_ok, tap_not_ok, tap_directive; /* unindented ok / not ok lines; # SKIP, # TODO */
    bool generic; /* a runner-neutral summary line was read (s_generic_line) */
    long gen_passed, gen_failed, gen_skipped;
    bool in_ctest_failed, in_ctest_notrun, in_cargo_list;
    s_failures_t primary, secondary;
    s_want_t want;
    size_t want_index;
    size_t want_indent;
    bool oom;
} s_parser_t;

/* --- small string helpers ------------------------------------------------------------ */

static bool s_starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static const char *s_skip_space(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

static size_t s_trimmed_len(const char *s, size_t len)
{
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\r'))
        len--;
    return len;
}

/* Copies one raw line into buf without ANSI escape sequences and CRs. */
static void s_clean_line(char *buf, const char *s, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 1 < S_LINE_MAX; i++) {
        if (s[i] == '\x1b') {
            /* CSI: ESC [ params final-byte (0x40-0x7e); other escapes: ESC + one byte. */
            if (i + 1 < len && s[i + 1] == '[') {
                i += 2;
                while (i < len && !((unsigned char)s[i] >= 0x40 && (unsigned char)s[i] <= 0x7e))
                    i++;
            } else {
                i++;
            }
            continue;
        }
        if (s[i] == '\r')
            continue;
        buf[o++] = s[i];
    }
    buf[o] = '\0';
}

/* A count read from a summary line is believed only in 0..999,999,999: no suite is that
 * big, and sums of such counts cannot overflow. */
static bool s_count_ok(long n)
{
    return n >= 0 && n < 1000000000L;
}

/* Finds "<number> <word>" pairs in s[0..len): "2 failed, 40 passed (42)" gives
 * (2,failed) (40,passed) (42,""). A number glued to a letter or a '.' before it is not one. */
static size_t s_pairs(const char *s, size_t len, s_pair_t *pairs)
{
    size_t n = 0;
    for (size_t i = 0; i < len && n < S_MAX_PAIRS; i++) {
        bool starts_number = s[i] >= '0' && s[i] <= '9' &&
                             (i == 0 || !(s[i - 1] == '.' || (s[i - 1] >= '0' && s[i - 1] <= '9') ||
                                          (s[i - 1] >= 'a' && s[i - 1] <= 'z') ||
                                          (s[i - 1] >= 'A' && s[i - 1] <= 'Z')));
        if (!starts_number)
            continue;
        long value = 0;
        while (i < len && s[i] >= '0' && s[i] <= '9') {
            if (value < 100000000)
                value = value * 10 + (s[i] - '0');
            i++;
        }
        if (i < len && s[i] == '.')
            continue; /* a duration such as 0.12s */
        while (i < len && s[i] == ' ')
            i++;
        size_t w = 0;
        while (i < len && s[i] >= 'a' && s[i] <= 'z') {
            if (w + 1 < sizeof pairs[n].word)
                pairs[n].word[w++] = s[i];
            i++;
        }
        pairs[n].word[w] = '\0';
        pairs[n].n = value;
        n++;
        i--;
    }
    return n;
}

/* The length of the UTF-8 character at s (n > 0 bytes available), or 0 when the bytes there
 * are not one: a stray continuation byte, an overlong form, a surrogate, a code point over
 * U+10FFFF, or a sequence cut short. */
static size_t s_utf8_char_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    unsigned char lo = 0x80, hi = 0xBF; /* the range of the second byte */
    size_t len;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    }
    return len;
}

/* Copies src into dst (size bytes, NUL-terminated) as valid UTF-8: a byte that is not part
 * of a character becomes U+FFFD, and the copy stops before a character that does not fit,
 * so it never ends inside one. */
static void s_copy_utf8(char *dst, size_t size, const char *src)
{
    static const char replacement[] = "\xef\xbf\xbd";
    size_t len = strlen(src), o = 0;
    for (size_t i = 0; i < len;) {
        size_t n = s_utf8_char_len((const unsigned char *)src + i, len - i);
        const char *from = n > 0 ? src + i : replacement;
        size_t take = n > 0 ? n : sizeof replacement - 1;
        if (o + take >= size)
            break;
        memcpy(dst + o, from, take);
        o += take;
        i += n > 0 ? n : 1;
    }
    dst[o] = '\0';
}

/* --- failures ------------------------------------------------------------------------ */

/* Adds a failing test by name (deduplicated); returns its index, or -1 if not kept. */
static long s_add_failure(s_parser_t *p, s_failures_t *list, const char *name, size_t len)
{
    len = s_trimmed_len(name, len);
    if (len == 0)
        return -1;
    for (size_t i = 0; i < list->count; i++) {
        if (strlen(list->items[i].name) == len && memcmp(list->items[i].name, name, len) == 0)
            return (long)i;
    }
    if (list->count >= TESTRUN_MAX_FAILURES) {
        list->truncated = true;
        return -1;
    }
    char *copy = strndup(name, len);
    if (!copy) {
        p->oom = true;
        return -1;
    }
    list->items[list->count].name = copy;
    list->items[list->count].reason = NULL;
    return (long)list->count++;
}

static void s_set_reason(s_parser_t *p, const char *reason, size_t len)
{
    s_failure_t *f = &p->primary.items[p->want_index];
    p->want = S_WANT_NONE;
    len = s_trimmed_len(reason, len);
    if (f->reason || len == 0)
        return;
    f->reason = strndup(reason, len);
    if (!f->reason)
        p->oom = true;
}

/* A failure in the primary list whose reason comes on a later line. */
static void s_add_awaiting(s_parser_t *p, const char *name, size_t len, s_want_t want,
                           size_t indent)
{
    long i = s_add_failure(p, &p->primary, name, len);
    p->want = S_WANT_NONE;
    if (i >= 0 && !p->primary.items[i].reason) {
        p->want = want;
        p->want_index = (size_t)i;
        p->want_indent = indent;
    }
}

/* A failure whose line also carries the reason after " - " (pytest, ctest). */
static void s_add_with_reason(s_parser_t *p, const char *name, size_t name_len, const char *reason,
                              size_t reason_len)
{
    long i = s_add_failure(p, &p->primary, name, name_len);
    if (i >= 0) {
        p->want_index = (size_t)i;
        s_set_reason(p, reason, reason_len);
    }
}

/* --- recognisers, one per runner ----------------------------------------------------- */

/* Python's unittest: "Ran 5 tests in 0.003s", then "OK", "OK (skipped=1)" or
 * "FAILED (failures=2, errors=1, skipped=1)"; each failing test has a header
 * "FAIL: test_add (tests.test_math.MathTest.test_add)" (or "ERROR: ..."). The skipped are
 * counted in Ran. */
static bool s_unittest_line(s_parser_t *p, const char *t)
{
    long ran = 0;
    char unit[8];
    if (sscanf(t, "Ran %ld %7s in ", &ran, unit) == 2 && s_count_ok(ran) &&
        (strcmp(unit, "tests") == 0 || strcmp(unit, "test") == 0)) {
        p->unittest = true;
        p->ut_run = ran;
        p->ut_failed = -1;
        p->ut_skipped = 0;
        return true;
    }
    if (p->unittest && p->ut_failed < 0 && (strcmp(t, "OK") == 0 || s_starts(t, "OK (") ||
                                            s_starts(t, "FAILED ("))) {
        s_pair_t pairs[S_MAX_PAIRS];
        long failed = 0, skipped = 0;
        /* "failures=2" has no space: read each key=value by hand. */
        for (const char *q = t; (q = strchr(q, '=')) != NULL; q++) {
            const char *key = q;
            while (key > t && key[-1] >= 'a' && key[-1] <= 'z')
                key--;
            size_t n = s_pairs(q + 1, strcspn(q + 1, ",)"), pairs);
            long value = n == 1 && s_count_ok(pairs[0].n) ? pairs[0].n : 0;
            if (s_starts(key, "failures=") || s_starts(key, "errors="))
                failed += value;
            else if (s_starts(key, "skipped="))
                skipped += value;
        }
        p->ut_failed = failed;
        p->ut_skipped = skipped;
        return true;
    }
    if ((s_starts(t, "FAIL: ") || s_starts(t, "ERROR: ")) && t[strlen(t) - 1] == ')') {
        const char *name = t + (t[0] == 'F' ? 6 : 7);
        const char *paren = strrchr(name, '(');
        if (paren != NULL && paren > name && memchr(paren, '.', strlen(paren)) != NULL) {
            s_add_failure(p, &p->primary, name, strlen(name));
            return true;
        }
    }
    return false;
}

/* pytest: "==== 2 failed, 40 passed, 1 skipped in 0.12s ====" (or without the '='s with
 * -q), "FAILED tests/test_x.py::test_y - AssertionError: ...", "ERROR tests/x.py - ...". */
static bool s_pytest_line(s_parser_t *p, const char *t)
{
    if (s_starts(t, "FAILED ") || s_starts(t, "ERROR ")) {
        const char *name = t + (t[0] == 'F' ? 7 : 6);
        const char *dash = strstr(name, " - ");
        size_t name_len = dash ? (size_t)(dash - name) : strlen(name);
        if (memmem(name, name_len, "::", 2) || memmem(name, name_len, ".py", 3)) {
            const char *reason = dash ? dash + 3 : "";
            s_add_with_reason(p, name, name_len, reason, strlen(reason));
            return true;
        }
        return false;
    }
    const char *s = t;
    while (*s == '=' || *s == ' ')
        s++;
    size_t len = strlen(s);
    while (len > 0 && (s[len - 1] == '=' || s[len - 1] == ' '))
        len--;
    if (len == 0 || !((s[0] >= '0' && s[0] <= '9') || s_starts(s, "no tests ran")))
        return false;
    /* The part before the last " in <duration>". */
    const char *in = NULL;
    for (const char *q = s; (q = memmem(q, (size_t)(s + len - q), " in ", 4)) != NULL; q += 4)
        in = q;
    if (!in || !(in[4] >= '0' && in[4] <= '9'))
        return false;
    s_pair_t pairs[S_MAX_PAIRS];
    size_t n = s_pairs(s, (size_t)(in - s), pairs);
    long passed = 0, failed = 0, skipped = 0;
    bool known = s_starts(s, "no tests ran");
    for (size_t i = 0; i < n; i++) {
        const char *w = pairs[i].word;
        if (strcmp(w, "passed") == 0 || strcmp(w, "xpassed") == 0)
            passed += pairs[i].n;
        else if (strcmp(w, "failed") == 0 || strcmp(w, "error") == 0 || strcmp(w, "errors") == 0)
            failed += pairs[i].n;
        else if (strcmp(w, "skipped") == 0 || strcmp(w, "xfailed") == 0)
            skipped += pairs[i].n;
        else if (strcmp(w, "deselected") != 0 && strcmp(w, "warning") != 0 &&
                 strcmp(w, "warnings") != 0 && strcmp(w, "rerun") != 0)
            return false; /* not a pytest summary */
        known = true;
    }
    if (!known)
        return false;
    p->pytest = true;
    p->py_passed = passed;
    p->py_failed = failed;
    p->py_skipped = skipped;
    return true;
}

/* jest "Tests:       2 failed, 1 skipped, 40 passed, 43 total" and vitest
 * "Tests  2 failed | 40 passed (42)"; jest's "● suite › name", vitest's
 * "FAIL  file > suite > name", and the ✕ / × marks of both. */
static bool s_js_line(s_parser_t *p, const char *t)
{
    bool jest = s_starts(t, "Tests:");
    bool vitest = !jest && s_starts(t, "Tests ") && s_skip_space(t + 6)[0] >= '0' &&
                  s_skip_space(t + 6)[0] <= '9';
    if (jest || vitest) {
        s_pair_t pairs[S_MAX_PAIRS];
        size_t n = s_pairs(t, strlen(t), pairs);
        long passed = 0, failed = 0, skipped = 0, total = -1;
        for (size_t i = 0; i < n; i++) {
            const char *w = pairs[i].word;
            if (strcmp(w, "passed") == 0)
                passed += pairs[i].n;
            else if (strcmp(w, "failed") == 0)
                failed += pairs[i].n;
            else if (strcmp(w, "skipped") == 0 || strcmp(w, "todo") == 0 ||
                     strcmp(w, "pending") == 0)
                skipped += pairs[i].n;
            else if (strcmp(w, "total") == 0 || w[0] == '\0')
                total = pairs[i].n;
        }
        if (n == 0)
            return false;
        p->jest = true;
        p->js_passed = passed;
        p->js_failed = failed;
        p->js_skipped = skipped;
        p->js_total = total;
        return true;
    }
    if (s_starts(t, "\xe2\x97\x8f ")) { /* ● */
        const char *name = s_skip_space(t + 4);
        if (s_starts(name, "Console"))
            return false;
        s_add_awaiting(p, name, strlen(name), S_WANT_NEXT_LINE, 0);
        return true;
    }
    if (s_starts(t, "FAIL ") && strstr(t, " > ")) {
        const char *name = s_skip_space(t + 5);
        s_add_awaiting(p, name, strlen(name), S_WANT_NEXT_LINE, 0);
        return true;
    }
    bool cross = s_starts(t, "\xe2\x9c\x95 ") || s_starts(t, "\xc3\x97 "); /* ✕ or × */
    if (cross) {
        const char *name = s_skip_space(t + (t[0] == '\xe2' ? 4 : 3));
        size_t len = strlen(name);
        /* Drop a duration: "name (5 ms)" or "name 12ms". */
        const char *paren = strrchr(name, '(');
        if (paren && strstr(paren, "ms)"))
            len = (size_t)(paren - name);
        else if (len > 2 && strcmp(name + len - 2, "ms") == 0) {
            size_t k = len - 2;
            while (k > 0 && name[k - 1] >= '0' && name[k - 1] <= '9')
                k--;
            if (k > 0 && k < len - 2 && name[k - 1] == ' ')
                len = k - 1;
        }
        s_add_failure(p, &p->secondary, name, len);
        return true;
    }
    return false;
}

/* cargo: "test result: FAILED. 40 passed; 2 failed; 1 ignored; ..." (summed over the
 * binaries), "---- tests::foo stdout ----", and the name list under "failures:". */
static bool s_cargo_line(s_parser_t *p, const char *raw, const char *t)
{
    if (s_starts(t, "test result: ")) {
        s_pair_t pairs[S_MAX_PAIRS];
        size_t n = s_pairs(t, strlen(t), pairs);
        for (size_t i = 0; i < n; i++) {
            if (strcmp(pairs[i].word, "passed") == 0)
                p->cg_passed += pairs[i].n;
            else if (strcmp(pairs[i].word, "failed") == 0)
                p->cg_failed += pairs[i].n;
            else if (strcmp(pairs[i].word, "ignored") == 0)
                p->cg_ignored += pairs[i].n;
        }
        p->cargo = true;
        p->in_cargo_list = false;
        return true;
    }
    if (s_starts(t, "---- ")) {
        /* "---- <test name> stdout ----": a line without a name between (a separator
         * a test printed itself, "---- stdout ----") is no failure. */
        const char *name = t + 5;
        const char *end = strstr(name, " stdout ----");
        if (end == NULL || end == name)
            return false;
        s_add_awaiting(p, name, (size_t)(end - name), S_WANT_CARGO, 0);
        return true;
    }
    if (strcmp(t, "failures:") == 0 && raw[0] == 'f') {
        p->in_cargo_list = true;
        return true;
    }
    if (p->in_cargo_list) {
        /* "    tests::foo" lines; anything else ends the list. */
        if (s_starts(raw, "    ") && !strchr(t, ' ')) {
            s_add_failure(p, &p->primary, t, strlen(t));
            return true;
        }
        if (t[0] != '\0')
            p->in_cargo_list = false;
    }
    return false;
}

/* go: "--- FAIL: TestFoo (0.00s)" (and PASS / SKIP with -v), package lines
 * "ok  \texample.com/x\t0.01s" and "FAIL\texample.com/x\t0.01s". */
static bool s_go_line(s_parser_t *p, const char *raw, const char *t)
{
    if (s_starts(t, "--- FAIL: ") || s_starts(t, "--- PASS: ") || s_starts(t, "--- SKIP: ")) {
        const char *name = t + 10;
        const char *paren = strstr(name, " (");
        size_t len = paren ? (size_t)(paren - name) : strlen(name);
        p->go = true;
        if (t[4] == 'F') {
            p->go_fail++;
            s_add_awaiting(p, name, len, S_WANT_GO, (size_t)(t - raw));
        } else if (t[4] == 'P') {
            p->go_pass++;
        } else {
            p->go_skip++;
        }
        return true;
    }
    if (s_starts(t, "ok") && (t[2] == ' ' || t[2] == '\t') && strchr(t, '\t')) {
        p->go = true;
        p->go_pkg_ok++;
        return true;
    }
    if (s_starts(t, "FAIL\t")) {
        const char *pkg = t + 5;
        size_t len = strcspn(pkg, "\t ");
        const char *why = strstr(pkg, "[build failed]")   ? "build failed"
                          : strstr(pkg, "[setup failed]") ? "setup failed"
                                                          : "package failed";
        char name[S_LINE_MAX];
        snprintf(name, sizeof name, "%.*s - %s", (int)len, pkg, why);
        p->go = true;
        p->go_pkg_fail++;
        s_add_failure(p, &p->secondary, name, strlen(name));
        return true;
    }
    return false;
}

/* ctest: "95% tests passed, 1 tests failed out of 20", then the lines under "The following
 * tests FAILED:" ("  7 - name (Failed)") and "The following tests did not run:". */
static bool s_ctest_line(s_parser_t *p, const char *t)
{
    long pct, failed, total;
    if (sscanf(t, "%ld%% tests passed, %ld tests failed out of %ld", &pct, &failed, &total) == 3 &&
        s_count_ok(failed) && s_count_ok(total)) {
        p->ctest = true;
        p->ct_failed = failed;
        p->ct_total = total;
        p->in_ctest_failed = p->in_ctest_notrun = false;
        return true;
    }
    if (s_starts(t, "The following tests FAILED:")) {
        p->in_ctest_failed = true;
        p->in_ctest_notrun = false;
        return true;
    }
    if (s_starts(t, "The following tests did not run:")) {
        p->in_ctest_notrun = true;
        p->in_ctest_failed = false;
        return true;
    }
    if (!p->in_ctest_failed && !p->in_ctest_notrun)
        return false;
    /* "7 - name (Failed)" */
    const char *q = t;
    while (*q >= '0' && *q <= '9')
        q++;
    if (q == t || !s_starts(q, " - ")) {
        p->in_ctest_failed = p->in_ctest_notrun = false;
        return false;
    }
    if (p->in_ctest_notrun) {
        p->ct_skipped++;
        return true;
    }
    const char *name = q + 3;
    const char *paren = strrchr(name, '(');
    size_t name_len = paren ? (size_t)(paren - name) : strlen(name);
    const char *reason = paren ? paren + 1 : "";
    size_t reason_len = strcspn(reason, ")");
    s_add_with_reason(p, name, name_len, reason, reason_len);
    return true;
}

/* A TAP test line's directive: true when `q` (the text after "ok N" / "not ok N") carries
 * "# SKIP" or "# TODO", whose line is neither a pass nor a failure; *hash is where the
 * " # " starts, or NULL. */
static bool s_tap_directive(const char *q, const char **hash)
{
    *hash = strstr(q, " # ");
    return *hash != NULL &&
           (strncasecmp(*hash + 3, "skip", 4) == 0 || strncasecmp(*hash + 3, "todo", 4) == 0);
}

/* TAP from any producer (prove, bats, node --test, tap-spec ...): node's summary "# tests
 * 42" / "# pass 40" / "# fail 2" / "# skipped 1" (or the spec reporter's "ℹ pass 40");
 * "not ok 3 - name" followed by a YAML block with error:; and, for producers that print no
 * summary, the plan "1..N" and the unindented "ok" / "not ok" lines, counted (indented ones
 * are subtests, which their parent's line already counts). `indented` says whether the
 * line started with white space. */
static bool s_tap_line(s_parser_t *p, const char *t, bool indented)
{
    long planned;
    char after = ' ';
    if (!indented && s_starts(t, "1..") && t[3] >= '0' && t[3] <= '9' &&
        sscanf(t, "1..%ld%c", &planned, &after) >= 1 && after == ' ' && s_count_ok(planned)) {
        p->tap_plan = planned;
        return true;
    }
    const char *hash;
    if (!indented && (strcmp(t, "ok") == 0 || s_starts(t, "ok "))) {
        if (s_tap_directive(t + 2, &hash))
            p->tap_directive++;
        else
            p->tap_ok++;
        return true;
    }
    const char *body = NULL;
    if (s_starts(t, "# "))
        body = t + 2;
    else if (s_starts(t, "\xe2\x84\xb9 ")) /* ℹ */
        body = t + 4;
    if (body) {
        static const char *const keys[] = {"tests ", "pass ", "fail ", "skipped ", "todo ", NULL};
        for (int k = 0; keys[k]; k++) {
            if (!s_starts(body, keys[k]))
                continue;
            char *end;
            long n = strtol(body + strlen(keys[k]), &end, 10);
            if (end == body + strlen(keys[k]) || *s_skip_space(end) != '\0' || !s_count_ok(n))
                return false;
            p->tap = true;
            if (k == 1) {
                p->tap_pass = n;
                p->tap_has_pass = true;
            } else if (k == 2) {
                p->tap_fail = n;
                p->tap_has_fail = true;
            } else if (k >= 3) {
                p->tap_skip += n;
            }
            return true;
        }
        return false;
    }
    if (s_starts(t, "not ok ")) {
        const char *q = t + 7;
        while (*q >= '0' && *q <= '9')
            q++;
        if (s_starts(q, " - "))
            q += 3;
        /* A directive ("# SKIP", "# TODO") is not a failure. */
        if (s_tap_directive(q, &hash)) {
            p->tap_directive += !indented;
            return true;
        }
        p->tap_not_ok += !indented;
        s_add_awaiting(p, q, hash ? (size_t)(hash - q) : strlen(q), S_WANT_TAP, 0);
        return true;
    }
    return false;
}

/* The kind of count a word after a number names in a runner-neutral summary line. */
typedef enum { S_WORD_OTHER, S_WORD_NEUTRAL, S_WORD_PASSED, S_WORD_FAILED, S_WORD_TOTAL,
               S_WORD_SKIPPED } s_word_t;

static s_word_t s_word_kind(const char *word)
{
    static const char *const passed[] = {"passed", "passing", "succeeded", NULL};
    static const char *const failed[] = {"failed", "failing", "failures", "failure",
                                         "errors", "error",   NULL};
    static const char *const total[] = {"tests", "test", "examples", "example",
                                        "runs",  "run",  "total",    NULL};
    static const char *const skipped[] = {"skipped", "skip",  "skips", "pending",
                                          "ignored", "todo",  NULL};
    /* Words that may stand beside the counts: durations, assertions, warnings. */
    static const char *const neutral[] = {"",        "ms",          "s",        "sec",
                                          "seconds", "assertions",  "assertion", "warnings",
                                          "warning", NULL};
    static const char *const *const lists[] = {passed, failed, total, skipped, neutral};
    static const s_word_t kinds[] = {S_WORD_PASSED, S_WORD_FAILED, S_WORD_TOTAL, S_WORD_SKIPPED,
                                     S_WORD_NEUTRAL};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (size_t i = 0; lists[k][i] != NULL; i++)
            if (strcmp(word, lists[k][i]) == 0)
                return kinds[k];
    return S_WORD_OTHER;
}

/* A summary line of no runner in particular, such as a Makefile's own test script, mocha,
 * RSpec, minitest or Unity prints: "3 passed, 0 failed", "12 passing (40ms)" and "1
 * failing" (mocha, on lines of their own), "10 tests, 2 failures", "10 examples, 1
 * failure, 2 pending", "10 runs, 20 assertions, 1 failures, 0 errors, 2 skips", "5 Tests 1
 * Failures 0 Ignored" (any case). Every count on the line must name a known kind, and the
 * line must give two kinds, one of them passed or failed -- or be one of mocha's own
 * "passing" / "failing" / "pending" lines -- so that "2 errors generated" (a compiler) or "3 files
 * changed, 1 failed to apply" is no summary. Counts of several such lines add up (a make
 * target running several suites). Chosen only when no runner's own summary was read. */
static bool s_generic_line(s_parser_t *p, const char *t)
{
    char lower[S_LINE_MAX];
    size_t len = strlen(t);
    for (size_t i = 0; i <= len; i++)
        lower[i] = (char)tolower((unsigned char)t[i]);
    s_pair_t pairs[S_MAX_PAIRS];
    size_t n = s_pairs(lower, len, pairs);
    long counts[S_WORD_SKIPPED + 1] = {0};
    bool seen[S_WORD_SKIPPED + 1] = {false};
    bool mocha = false;
    for (size_t i = 0; i < n; i++) {
        s_word_t kind = s_word_kind(pairs[i].word);
        if (kind == S_WORD_OTHER || !s_count_ok(pairs[i].n))
            return false;
        counts[kind] += pairs[i].n;
        seen[kind] = true;
        mocha = mocha || strcmp(pairs[i].word, "passing") == 0 ||
                strcmp(pairs[i].word, "failing") == 0 || strcmp(pairs[i].word, "pending") == 0;
    }
    int kinds = seen[S_WORD_PASSED] + seen[S_WORD_FAILED] + seen[S_WORD_TOTAL] +
                seen[S_WORD_SKIPPED];
    bool summary = (kinds >= 2 && (seen[S_WORD_PASSED] || seen[S_WORD_FAILED])) ||
                   (mocha && kinds >= 1);
    if (!summary)
        return false;
    long passed = counts[S_WORD_PASSED];
    if (!seen[S_WORD_PASSED] && seen[S_WORD_TOTAL]) {
        passed = counts[S_WORD_TOTAL] - counts[S_WORD_FAILED] - counts[S_WORD_SKIPPED];
        if (passed < 0)
            passed = 0;
    }
    p->generic = true;
    p->gen_passed += passed;
    p->gen_failed += counts[S_WORD_FAILED];
    p->gen_skipped += counts[S_WORD_SKIPPED];
    return true;
}

/* Feeds a line to the failure that waits for its reason; true when the line was used. */
static bool s_want_line(s_parser_t *p, const char *raw, const char *t)
{
    switch (p->want) {
    case S_WANT_NONE:
        return false;
    case S_WANT_NEXT_LINE:
        if (t[0] == '\0')
            return true;
        s_set_reason(p, t, strlen(t));
        return true;
    case S_WANT_GO:
        if ((size_t)(t - raw) > p->want_indent && !s_starts(t, "---") && !s_starts(t, "===")) {
            s_set_reason(p, t, strlen(t));
            return true;
        }
        p->want = S_WANT_NONE;
        return false;
    case S_WANT_CARGO:
        if (t[0] == '\0')
            return true;
        if (s_starts(t, "thread '") && strstr(t, "panicked at ")) {
            const char *msg = strstr(t, "panicked at '");
            if (msg) { /* Rust before 1.73: panicked at 'message', file:line */
                msg += strlen("panicked at '");
                const char *end = strstr(msg, "', ");
                s_set_reason(p, msg, end ? (size_t)(end - msg) : strlen(msg));
            }
            return true;
        }
        s_set_reason(p, t, strlen(t));
        return true;
    case S_WANT_TAP:
        if (s_starts(t, "ok ") || s_starts(t, "not ok ") || s_starts(t, "# ") ||
            strcmp(t, "...") == 0) {
            p->want = S_WANT_NONE;
            return false;
        }
        if (s_starts(t, "error: ")) {
            const char *v = t + 7;
            if (v[0] == '|' || v[0] == '>') {
                p->want = S_WANT_NEXT_LINE;
                return true;
            }
            size_t len = strlen(v);
            if (len >= 2 && (v[0] == '\'' || v[0] == '"') && v[len - 1] == v[0]) {
                v++;
                len -= 2;
            }
            s_set_reason(p, v, len);
        }
        return true;
    }
    return false;
}

static void s_feed(s_parser_t *p, const char *raw)
{
    const char *t = s_skip_space(raw);
    if (s_want_line(p, raw, t))
        return;
    if (t[0] == '\0') {
        p->in_ctest_failed = p->in_ctest_notrun = false;
        return;
    }
    if (s_ctest_line(p, t) || s_cargo_line(p, raw, t) || s_go_line(p, raw, t) ||
        s_pytest_line(p, t) || s_js_line(p, t) || s_unittest_line(p, t) ||
        s_tap_line(p, t, t != raw))
        return;
    s_generic_line(p, t);
}

/* --- results ------------------------------------------------------------------------- */

static void s_free_failures(s_failures_t *list)
{
    for (size_t i = 0; i < list->count; i++) {
        free(list->items[i].name);
        free(list->items[i].reason);
    }
    list->count = 0;
}

/* Chooses the counts of the first runner that printed a summary. */
static void s_choose_counts(const s_parser_t *p, testrun_result_t *r)
{
    r->run = r->passed = r->failed = r->skipped = -1;
    if (p->pytest) {
        r->passed = p->py_passed;
        r->failed = p->py_failed;
        r->skipped = p->py_skipped;
    } else if (p->jest) {
        r->passed = p->js_passed;
        r->failed = p->js_failed;
        r->skipped = p->js_skipped;
        if (p->js_total >= 0 && p->js_total > p->js_passed + p->js_failed + p->js_skipped)
            r->skipped = p->js_total - p->js_passed - p->js_failed;
    } else if (p->cargo) {
        r->passed = p->cg_passed;
        r->failed = p->cg_failed;
        r->skipped = p->cg_ignored;
    } else if (p->ctest) {
        r->failed = p->ct_failed;
        r->skipped = p->ct_skipped;
        r->passed = p->ct_total - p->ct_failed - p->ct_skipped;
        if (r->passed < 0)
            r->passed = 0;
    } else if (p->tap && (p->tap_has_pass || p->tap_has_fail)) {
        r->passed = p->tap_has_pass ? p->tap_pass : 0;
        r->failed = p->tap_has_fail ? p->tap_fail : 0;
        r->skipped = p->tap_skip;
    } else if (p->go) {
        bool verbose = p->go_pass > 0 || p->go_skip > 0;
        r->passed = verbose ? p->go_pass : p->go_pkg_ok;
        r->failed = verbose ? p->go_fail : p->go_pkg_fail;
        r->skipped = verbose ? p->go_skip : 0;
    } else if (p->unittest && p->ut_failed >= 0) {
        r->failed = p->ut_failed;
        r->skipped = p->ut_skipped;
        r->passed = p->ut_run - p->ut_failed - p->ut_skipped;
        if (r->passed < 0)
            r->passed = 0;
    } else if (p->tap_plan >= 0) {
        /* A planned test that never reported (the producer died) counts as failed. */
        long seen = p->tap_ok + p->tap_not_ok + p->tap_directive;
        r->passed = p->tap_ok;
        r->failed = p->tap_not_ok + (p->tap_plan > seen ? p->tap_plan - seen : 0);
        r->skipped = p->tap_directive;
    } else if (p->generic) {
        r->passed = p->gen_passed;
        r->failed = p->gen_failed;
        r->skipped = p->gen_skipped;
    }
    if (r->passed >= 0 && r->failed >= 0)
        r->run = r->passed + r->failed;
}

/* Node reports a suite as failing because its subtests did; the subtests say more. */
static bool s_is_parent_failure(const s_failure_t *f)
{
    return f->reason && strstr(f->reason, "subtest") && strstr(f->reason, "failed");
}

static void s_choose_failures(s_parser_t *p, testrun_result_t *r)
{
    const s_failures_t *list = p->primary.count > 0 ? &p->primary : &p->secondary;
    size_t parents = 0;
    for (size_t i = 0; i < list->count; i++)
        parents += s_is_parent_failure(&list->items[i]);
    bool skip_parents = parents < list->count;
    r->failures = calloc(list->count ? list->count : 1, sizeof *r->failures);
    if (!r->failures) {
        p->oom = true;
        return;
    }
    for (size_t i = 0; i < list->count; i++) {
        const s_failure_t *f = &list->items[i];
        if (skip_parents && s_is_parent_failure(f))
            continue;
        /* Name and reason each come from one line (< S_LINE_MAX bytes). */
        char full[2 * S_LINE_MAX + 4];
        char text[TESTRUN_MAX_FAILURE_LEN + 1];
        if (f->reason)
            snprintf(full, sizeof full, "%s - %s", f->name, f->reason);
        else
            snprintf(full, sizeof full, "%s", f->name);
        s_copy_utf8(text, sizeof text, full);
        r->failures[r->nfailures] = strdup(text);
        if (!r->failures[r->nfailures]) {
            p->oom = true;
            return;
        }
        r->nfailures++;
    }
    r->failures_truncated = list->truncated;
    r->failures_reported = list == &p->primary && r->nfailures > 0;
}

int testparse_into(testrun_result_t *r, const char *output, size_t len)
{
    s_parser_t *p = calloc(1, sizeof *p);
    if (!p)
        return failure_set(FAILURE_MEMORY, "out of memory parsing test output");
    p->tap_plan = -1;
    char *line = malloc(S_LINE_MAX);
    size_t pos = 0;
    while (line && pos < len && !p->oom) {
        const char *nl = memchr(output + pos, '\n', len - pos);
        size_t line_len = nl ? (size_t)(nl - (output + pos)) : len - pos;
        s_clean_line(line, output + pos, line_len);
        s_feed(p, line);
        pos += line_len + 1;
    }
    if (line)
        s_choose_counts(p, r);
    if (line && !p->oom)
        s_choose_failures(p, r);
    bool failed = !line || p->oom;
    free(line);
    s_free_failures(&p->primary);
    s_free_failures(&p->secondary);
    free(p);
    return failed ? failure_set(FAILURE_MEMORY, "out of memory parsing test output") : 0;
}

testrun_result_t *testparse_result_new(void)
{
    testrun_result_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->exit_code = -1;
    r->run = r->passed = r->failed = r->skipped = -1;
    return r;
}

void testrun_result_destroy(testrun_result_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    testrun_result_t *self = *self_p;
    for (size_t i = 0; i < self->nfailures; i++)
        free(self->failures[i]);
    free(self->failures);
    free(self->output);
    free(self);
    *self_p = NULL;
}

int testrun_parse(testrun_result_t **out, const char *output, size_t len)
{
    *out = NULL;
    testrun_result_t *r = testparse_result_new();
    if (r)
        r->output = malloc(len + 1);
    if (!r || !r->output) {
        testrun_result_destroy(&r);
        return failure_set(FAILURE_MEMORY, "out of memory parsing test output");
    }
    memcpy(r->output, output, len);
    r->output[len] = '\0';
    r->output_len = len;
    int rc = testparse_into(r, r->output, len);
    if (rc != 0) {
        testrun_result_destroy(&r);
        return rc;
    }
    *out = r;
    return 0;
}

/* True when the output says tests failed: a failed count above 0 or, when it gives no
 * count, a test named by a runner's failure report. A count of 0 outweighs names (jest
 * prints "● Validation Warning" blocks in passing runs). */
static bool s_reports_failures(const testrun_result_t *result)
{
    return result->failed > 0 || (result->failed < 0 && result->failures_reported);
}

testrun_verdict_t testrun_verdict(const testrun_result_t *result)
{
    if (!result->started || result->timed_out || result->exit_code < 0)
        return TESTRUN_ERROR;
    if (result->exit_code == 0)
        return s_reports_failures(result) ? TESTRUN_FAIL : TESTRUN_PASS;
    bool parsed = result->run >= 0 || result->failed >= 0 || result->nfailures > 0;
    return parsed ? TESTRUN_FAIL : TESTRUN_ERROR;
}

const char *testrun_verdict_name(testrun_verdict_t verdict)
{
    switch (verdict) {
    case TESTRUN_PASS:
        return "PASS";
    case TESTRUN_FAIL:
        return "FAIL";
    case TESTRUN_ERROR:
        break;
    }
    return "ERROR";
}
