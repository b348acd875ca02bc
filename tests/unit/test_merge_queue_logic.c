/* test_merge_queue_logic: the merge queue's rules (services/merge/merge_queue.c) with the
 * git work played by fake hooks: commits are numbers, a candidate remembers the sources it
 * holds, a source named "bad..." fails the tests of every candidate that holds it, and
 * landing is a compare-and-swap of a variable. Each case starts from a state file written
 * as a crash or a race would leave it:
 *   - landed_before_save: the target already is the head's tested candidate (a kill -9
 *     between the landing and the save): recorded as landed, the landing hook not called
 *     again (nothing lands twice);
 *   - failure_waits_for_ahead: a candidate built on a failing item ahead fails while that
 *     item is still being tested by another (live) worker: it is not ejected; once the
 *     item ahead fails and is ejected, it is rebuilt without it, passes and lands;
 *     The window halves with the ejection and grows with the landing.
 *   - urgent_first: an urgent item arriving behind a passed normal one lands first, the
 *     normal one is rebuilt on top of it. */
#include "check.h"
#include "testenv.h"

#include "merge_queue.h"
#include "merge_queue_store.h"

#include "clock.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_MAX 64

static char s_tip[41];
static int s_next = 100;
static char s_ids[S_MAX][41], s_holds[S_MAX][256];
static int s_count;
static int s_land_calls, s_test_calls;
static char s_landed[8][41];

static const char *s_new_commit(const char *holds)
{
    snprintf(s_ids[s_count], 41, "%040d", s_next++);
    snprintf(s_holds[s_count], sizeof s_holds[0], "%s", holds);
    return s_ids[s_count++];
}

static const char *s_holds_of(const char *commit)
{
    for (int i = 0; i < s_count; i++)
        if (strcmp(s_ids[i], commit) == 0)
            return s_holds[i];
    return "";
}

static int s_tip_hook(char out[41], void *arg)
{
    (void)arg;
    memcpy(out, s_tip, 41);
    return 0;
}

static int s_build(const json_t *item, const char *base, char out[41], const char **strategy,
                   json_t *facts, char **reason, void *arg)
{
    (void)facts, (void)reason, (void)arg;
    char holds[256];
    snprintf(holds, sizeof holds, "%s %s", s_holds_of(base),
             json_string_value(json_object_get(item, "source")));
    memcpy(out, s_new_commit(holds), 41);
    *strategy = "clean";
    return 0;
}

static int s_test(const json_t *item, const char *candidate, const char **verdict, json_t *facts,
                  char **reason, void *arg)
{
    (void)item, (void)facts, (void)arg;
    s_test_calls++;
    if (strstr(s_holds_of(candidate), "bad") != NULL) {
        *reason = strdup("tests failed: test_bad");
        return 1;
    }
    *verdict = "PASS";
    return 0;
}

static int s_land(const json_t *item, const char *base, const char *candidate, json_t *facts,
                  char **reason, void *arg)
{
    (void)item, (void)facts, (void)reason, (void)arg;
    if (strcmp(s_tip, base) != 0)
        return 1;
    memcpy(s_landed[s_land_calls++ % 8], candidate, 41);
    memcpy(s_tip, candidate, 41);
    return 0;
}

static const merge_queue_hooks_t s_hooks = {
    .tip = s_tip_hook, .build = s_build, .test = s_test, .land = s_land};

/* An item as the store keeps it. */
static json_t *s_item(const char *id, int seq, int rank, const char *state, const char *base,
                      const char *candidate, const char *claim)
{
    return json_pack("{s:s, s:i, s:i, s:i, s:s, s:s, s:s, s:s, s:i, s:s, s:s, s:s, s:s, s:s, "
                     "s:i, s:s, s:s, s:I, s:I}",
                     "id", id, "attempt", 1, "seq", seq, "rank", rank, "workspace", "/w", "source",
                     id, "commit", "", "state", state, "gen", 0, "base", base, "candidate",
                     candidate, "claim", claim, "claim_kind", claim[0] ? "test" : "", "strategy",
                     "clean", "tests", 0, "verdict", "", "reason", "", "enqueued_ms",
                     (json_int_t)1, "ended_ms", (json_int_t)0);
}

/* Writes the queue of /repo into main with `items` (stolen). */
static void s_write(const char *dir, json_t *items, int next_seq)
{
    merge_queue_store_t *store = NULL;
    CHECK_INT(merge_queue_store_open(&store, dir, "/repo", "main"), 0);
    json_t *q = merge_queue_store_json(store);
    json_object_set_new(q, "items", items);
    json_object_set_new(q, "next_seq", json_integer(next_seq));
    CHECK_INT(merge_queue_store_save(store), 0);
    merge_queue_store_close(&store);
}

static const json_t *s_find(const json_t *q, const char *id)
{
    size_t i;
    const json_t *item;
    json_array_foreach(json_object_get(q, "items"), i, item)
    {
        if (strcmp(json_string_value(json_object_get(item, "id")), id) == 0)
            return item;
    }
    return NULL;
}

/* The state of item `id` in the stored queue. */
static const char *s_stored_state(const char *dir, const char *id)
{
    static char state[32];
    merge_queue_store_t *store = NULL;
    CHECK_INT(merge_queue_store_open(&store, dir, "/repo", "main"), 0);
    const json_t *item = s_find(merge_queue_store_json(store), id);
    snprintf(state, sizeof state, "%s",
             item ? json_string_value(json_object_get(item, "state")) : "(none)");
    merge_queue_store_close(&store);
    return state;
}

static json_int_t s_stored_window(const char *dir)
{
    merge_queue_store_t *store = NULL;
    CHECK_INT(merge_queue_store_open(&store, dir, "/repo", "main"), 0);
    json_int_t window = json_integer_value(json_object_get(merge_queue_store_json(store), "window"));
    merge_queue_store_close(&store);
    return window;
}

static merge_queue_end_t s_run(const char *dir, const char *id, int rank, int64_t wait_ms)
{
    merge_queue_request_t request = {.dir = dir, .repo = "/repo", .target = "main", .id = id,
                                     .attempt = 1, .rank = rank, .workspace = "/w",
                                     .source = id, .window = 8,
                                     .deadline_ms = clock_now_ms() + wait_ms};
    merge_queue_end_t end = MERGE_QUEUE_WAITING;
    json_t *item = NULL;
    CHECK_INT(merge_queue_run(&request, &s_hooks, &end, &item), 0);
    json_decref(item);
    return end;
}

static void s_reset(void)
{
    s_count = 0;
    s_land_calls = s_test_calls = 0;
    memcpy(s_tip, s_new_commit(""), 41);
}

static void test_landed_before_save(const char *dir)
{
    s_reset();
    const char *base = s_tip;
    char candidate[41];
    memcpy(candidate, s_new_commit(" a"), 41);
    json_t *items = json_array();
    json_array_append_new(items, s_item("a", 1, 2, "passed", base, candidate, ""));
    s_write(dir, items, 2);
    memcpy(s_tip, candidate, 41); /* the landing happened; the save did not */
    CHECK_INT(s_run(dir, "a", 2, 5000), MERGE_QUEUE_LANDED);
    CHECK_INT(s_land_calls, 0);
    CHECK_INT(s_test_calls, 0);
    CHECK_STR(s_stored_state(dir, "a"), "landed");
}

static void test_failure_waits_for_ahead(const char *dir)
{
    s_reset();
    char tip[41], cand_bad[41], cand_b[41];
    memcpy(tip, s_tip, 41);
    memcpy(cand_bad, s_new_commit(" bad"), 41);
    char holds[64];
    snprintf(holds, sizeof holds, " bad b");
    memcpy(cand_b, s_new_commit(holds), 41);
    /* Another worker, alive, is testing "bad". */
    char claim_path[700];
    snprintf(claim_path, sizeof claim_path, "%s/claim-other.lock", dir);
    int other = open(claim_path, O_RDWR | O_CREAT, 0600);
    CHECK(other >= 0 && flock(other, LOCK_EX | LOCK_NB) == 0);
    json_t *items = json_array();
    json_array_append_new(items, s_item("bad", 1, 2, "built", tip, cand_bad, "claim-other"));
    json_array_append_new(items, s_item("b", 2, 2, "built", cand_bad, cand_b, ""));
    s_write(dir, items, 3);
    /* b's candidate fails (it holds "bad"), but "bad" has not passed: b waits. */
    CHECK_INT(s_run(dir, "b", 2, 500), MERGE_QUEUE_WAITING);
    CHECK_INT(s_test_calls, 1);
    CHECK_STR(s_stored_state(dir, "b"), "failed");
    CHECK_STR(s_stored_state(dir, "bad"), "built");
    /* The other worker dies: "bad" is tested here, fails, is ejected; b is rebuilt without
     * it, passes and lands. */
    close(other);
    CHECK_INT(s_run(dir, "b", 2, 5000), MERGE_QUEUE_LANDED);
    CHECK_STR(s_stored_state(dir, "bad"), "ejected");
    CHECK_INT(s_land_calls, 1);
    /* The adaptive window: 8, halved by the ejection, one more for the landing. */
    CHECK_INT(s_stored_window(dir), 5);
    CHECK(strstr(s_holds_of(s_tip), "bad") == NULL && strstr(s_holds_of(s_tip), "b") != NULL);
}

static void test_urgent_first(const char *dir)
{
    s_reset();
    char tip[41], cand_n[41];
    memcpy(tip, s_tip, 41);
    memcpy(cand_n, s_new_commit(" n"), 41);
    json_t *items = json_array();
    json_array_append_new(items, s_item("n", 1, 2, "built", tip, cand_n, ""));
    s_write(dir, items, 2);
    /* "u" arrives urgent: queued ahead of "n", which is rebuilt on top of it. */
    CHECK_INT(s_run(dir, "u", 0, 5000), MERGE_QUEUE_LANDED);
    CHECK_INT(s_land_calls, 1);
    CHECK_STR(s_holds_of(s_landed[0]), " u");
    CHECK_INT(s_run(dir, "n", 2, 5000), MERGE_QUEUE_LANDED);
    CHECK_INT(s_land_calls, 2);
    CHECK_STR(s_holds_of(s_landed[1]), " u n");
}

int main(void)
{
    testenv_t *env = testenv_new("merge-queue-logic");
    CHECK(env != NULL);
    if (env == NULL)
        return check_exit_code("test_merge_queue_logic");
    char dir[600];
    snprintf(dir, sizeof dir, "%s/q1", env->dir);
    CHECK(mkdir(dir, 0700) == 0);
    test_landed_before_save(dir);
    snprintf(dir, sizeof dir, "%s/q2", env->dir);
    CHECK(mkdir(dir, 0700) == 0);
    test_failure_waits_for_ahead(dir);
    snprintf(dir, sizeof dir, "%s/q3", env->dir);
    CHECK(mkdir(dir, 0700) == 0);
    test_urgent_first(dir);
    testenv_destroy(&env);
    return check_exit_code("test_merge_queue_logic");
}
