/* merge_queue: the speculative merge queue (design notes in merge_queue.h). */
#include "merge_queue.h"

#include "merge_queue_store.h"

#include "clock.h"
#include "failure.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/time.h>
#include <unistd.h>

/* This process's claim file: flock'd for the process's life. */
static int s_claim_fd = -1;
static char s_claim_token[64];

/* The queue while locked: the store, and its active items in order. */
typedef struct {
    const merge_queue_request_t *req;
    const merge_queue_hooks_t *hooks;
    merge_queue_store_t *store;
    json_t *q;
    json_t **active; /* borrowed from q's items, sorted by (rank, seq) */
    size_t nactive;
    char tip[41];
} s_view_t;

int merge_queue_rank(const char *priority)
{
    static const char *const names[] = {"urgent", "high", "normal", "low"};
    for (int i = 0; priority != NULL && i < 4; i++)
        if (strcmp(priority, names[i]) == 0)
            return i;
    return 2;
}

static int64_t s_wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static const char *s_str(const json_t *item, const char *key)
{
    const char *v = json_string_value(json_object_get(item, key));
    return v ? v : "";
}

static json_int_t s_int(const json_t *item, const char *key)
{
    return json_integer_value(json_object_get(item, key));
}

static void s_set_str(json_t *item, const char *key, const char *value)
{
    json_object_set_new(item, key, json_string(value ? value : ""));
}

static void s_set_int(json_t *item, const char *key, json_int_t value)
{
    json_object_set_new(item, key, json_integer(value));
}

static bool s_is(const json_t *item, const char *state)
{
    return strcmp(s_str(item, "state"), state) == 0;
}

static bool s_ended(const json_t *item)
{
    return s_is(item, "landed") || s_is(item, "ejected");
}

static void s_event(s_view_t *v, const char *kind, const json_t *item, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void s_event(s_view_t *v, const char *kind, const json_t *item, const char *fmt, ...)
{
    char text[1200], line[1500];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    snprintf(line, sizeof line, "%s into %s: item %lld (%s, %s): %s", s_str(v->q, "repo"),
             s_str(v->q, "target"), (long long)s_int(item, "seq"), s_str(item, "id"),
             s_str(item, "source"), text);
    log_info("%s: %s", kind, line);
    if (v->hooks->event != NULL)
        v->hooks->event(kind, line, v->hooks->arg);
}

/* ---- claims ------------------------------------------------------------------------------ */

/* Takes this process's claim file (once). */
static int s_claim_init(const char *dir)
{
    if (s_claim_fd >= 0)
        return 0;
    snprintf(s_claim_token, sizeof s_claim_token, "claim-%d-%lld", (int)getpid(),
             (long long)s_wall_ms());
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s.lock", dir, s_claim_token);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        return failure_set(FAILURE_IO, "cannot take the claim file %s: %s", path, strerror(err));
    }
    s_claim_fd = fd;
    return 0;
}

/* True when the worker that made claim `token` is gone (its claim file unlocked). */
static bool s_claim_dead(const char *dir, const char *token)
{
    if (strcmp(token, s_claim_token) == 0)
        return false;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s.lock", dir, token);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT;
    bool dead = flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (dead)
        unlink(path);
    close(fd);
    return dead;
}

/* ---- the view ---------------------------------------------------------------------------- */

static int s_by_order(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    json_int_t rx = s_int(x, "rank"), ry = s_int(y, "rank");
    if (rx != ry)
        return rx < ry ? -1 : 1;
    json_int_t sx = s_int(x, "seq"), sy = s_int(y, "seq");
    return sx < sy ? -1 : sx > sy;
}

static int s_sort(s_view_t *v)
{
    json_t *items = json_object_get(v->q, "items");
    free(v->active);
    v->active = calloc(json_array_size(items) + 1, sizeof *v->active);
    v->nactive = 0;
    if (v->active == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    size_t i;
    json_t *item;
    json_array_foreach(items, i, item)
    {
        if (!s_ended(item))
            v->active[v->nactive++] = item;
    }
    qsort(v->active, v->nactive, sizeof *v->active, s_by_order);
    return 0;
}

static int s_open(s_view_t *v)
{
    int rc = merge_queue_store_open(&v->store, v->req->dir, v->req->repo, v->req->target);
    if (rc != 0)
        return rc;
    v->q = merge_queue_store_json(v->store);
    rc = s_sort(v);
    if (rc == 0 && (rc = v->hooks->tip(v->tip, v->hooks->arg)) != 0)
        log_warn("merge queue of %s: cannot read the target's tip: %s", v->req->target,
                 failure_message());
    return rc;
}

static void s_close(s_view_t *v)
{
    merge_queue_store_close(&v->store);
    free(v->active);
    v->active = NULL;
    v->nactive = 0;
    v->q = NULL;
}

static json_t *s_find(s_view_t *v, const char *id)
{
    json_t *items = json_object_get(v->q, "items");
    size_t i;
    json_t *item;
    json_t *found = NULL;
    json_array_foreach(items, i, item)
    {
        if (strcmp(s_str(item, "id"), id) == 0)
            found = item; /* the last one: the newest attempt */
    }
    return found;
}

/* Drops what was built for `item`: it goes back to waiting, and results of work claimed
 * before are dropped (gen). */
static void s_reset(s_view_t *v, json_t *item, const char *why)
{
    bool had = s_str(item, "base")[0] != '\0' || !s_is(item, "waiting");
    s_set_str(item, "state", "waiting");
    s_set_str(item, "base", "");
    s_set_str(item, "candidate", "");
    s_set_str(item, "claim", "");
    s_set_str(item, "claim_kind", "");
    s_set_int(item, "gen", s_int(item, "gen") + 1);
    json_object_del(item, "notes");
    json_object_del(item, "resolved_files");
    json_object_del(item, "failed_files");
    if (had)
        s_event(v, "merge-queue.reset", item, "rebuilt: %s", why);
}

/* The adaptive window (Zuul's): the setting at most, one more after each landing, half
 * (at least 1) after each ejection for failed tests. */
static size_t s_window(const s_view_t *v)
{
    json_int_t max = v->req->window > 0 ? v->req->window : 1;
    json_int_t now = s_int(v->q, "window");
    return (size_t)(now >= 1 && now < max ? now : max);
}

static void s_window_set(s_view_t *v, bool grow)
{
    json_int_t now = (json_int_t)s_window(v);
    json_int_t next = grow ? now + 1 : now / 2;
    s_set_int(v->q, "window", next < 1 ? 1 : next);
}

static void s_end(s_view_t *v, json_t *item, const char *state, const char *reason)
{
    s_set_str(item, "state", state);
    s_set_str(item, "claim", "");
    s_set_str(item, "claim_kind", "");
    s_set_int(item, "ended_ms", s_wall_ms());
    if (reason != NULL)
        s_set_str(item, "reason", reason);
    const char *counter = strcmp(state, "landed") == 0 ? "landed" : "ejected";
    s_set_int(v->q, counter, s_int(v->q, counter) + 1);
}

/* Claims of dead workers are dropped; every item whose base is not what is ahead of it
 * now is reset; a failed item with only passed items ahead is ejected. */
static void s_normalise_once(s_view_t *v)
{
    for (size_t i = 0; i < v->nactive; i++) {
        json_t *item = v->active[i];
        const char *claim = s_str(item, "claim");
        if (claim[0] != '\0' && s_claim_dead(v->req->dir, claim)) {
            s_event(v, "merge-queue.claim_lost", item, "the worker %s doing its %s is gone",
                    claim, s_str(item, "claim_kind"));
            if (strcmp(s_str(item, "claim_kind"), "build") == 0)
                s_set_str(item, "base", "");
            s_set_str(item, "claim", "");
            s_set_str(item, "claim_kind", "");
        }
    }
    const char *expected = v->tip;
    bool ahead_passed = true;
    for (size_t i = 0; i < v->nactive; i++) {
        json_t *item = v->active[i];
        const char *base = s_str(item, "base");
        bool fits = expected != NULL && base[0] != '\0' && strcmp(base, expected) == 0;
        if (!fits && (base[0] != '\0' || !s_is(item, "waiting")))
            s_reset(v, item,
                    expected == NULL ? "the item ahead of it is not built"
                                     : "what is ahead of it changed");
        if (s_is(item, "failed") && ahead_passed) {
            /* Failed with everything ahead of it passed: its own fault. */
            s_end(v, item, "ejected", NULL);
            s_window_set(v, false);
            s_event(v, "merge-queue.ejected", item, "ejected: %s", s_str(item, "reason"));
            continue;
        }
        ahead_passed = ahead_passed && s_is(item, "passed");
        /* A failed item stays out of the chain behind it (built without it) until it is
         * ejected, or rebuilt and retested because something ahead of it failed. */
        if (!s_is(item, "failed"))
            expected =
                s_is(item, "built") || s_is(item, "passed") ? s_str(item, "candidate") : NULL;
    }
}

static void s_normalise(s_view_t *v)
{
    size_t before;
    do {
        before = v->nactive;
        s_normalise_once(v);
        if (s_sort(v) != 0)
            return;
    } while (v->nactive != before);
}

/* Lands every passed item at the head whose base is the tip. */
static void s_land(s_view_t *v)
{
    while (v->nactive > 0) {
        json_t *head = v->active[0];
        if (!s_is(head, "passed"))
            return;
        const char *candidate = s_str(head, "candidate");
        if (strcmp(candidate, v->tip) != 0) {
            if (strcmp(s_str(head, "base"), v->tip) != 0)
                return; /* s_normalise resets it */
            char *reason = NULL;
            json_t *facts = json_object();
            int rc = v->hooks->land(head, v->tip, candidate, facts, &reason, v->hooks->arg);
            if (rc == 0)
                json_object_update(head, facts);
            json_decref(facts);
            if (rc == 2) {
                char *why = NULL;
                if (asprintf(&why, "cannot land: %s", reason ? reason : "refused") < 0)
                    why = NULL;
                s_end(v, head, "ejected", why ? why : "cannot land");
                s_event(v, "merge-queue.ejected", head, "ejected: %s", s_str(head, "reason"));
                free(why);
                free(reason);
                if (s_sort(v) == 0)
                    s_normalise(v);
                continue;
            }
            if (rc < 0) {
                /* Transient (the remote unreachable): the item leaves the queue and its
                 * task is tried again later, when it queues afresh. */
                s_end(v, head, "ejected", reason ? reason : "cannot land");
                s_set_int(head, "retry", 1);
                s_event(v, "merge-queue.ejected", head, "landing failed, to be retried: %s",
                        s_str(head, "reason"));
                free(reason);
                if (s_sort(v) == 0)
                    s_normalise(v);
                continue;
            }
            if (rc != 0) {
                s_event(v, "merge-queue.land_failed", head, "%s",
                        reason ? reason : "cannot land");
                free(reason);
                if (v->hooks->tip(v->tip, v->hooks->arg) == 0)
                    s_normalise(v);
                return;
            }
            free(reason);
        }
        snprintf(v->tip, sizeof v->tip, "%s", candidate);
        s_end(v, head, "landed", NULL);
        s_window_set(v, true);
        s_event(v, "merge-queue.landed", head, "%s landed on %s (%lld test run(s))", candidate,
                s_str(v->q, "target"), (long long)s_int(head, "tests"));
        /* The state must say so before anything else happens. */
        if (merge_queue_store_save(v->store) != 0)
            log_error("merge queue: %s", failure_message());
        memmove(v->active, v->active + 1, (v->nactive - 1) * sizeof *v->active);
        v->nactive--;
    }
}

/* Keeps the newest MERGE_QUEUE_KEEP_ENDED ended items. */
static void s_trim(s_view_t *v)
{
    json_t *items = json_object_get(v->q, "items");
    size_t ended = 0;
    for (size_t i = 0; i < json_array_size(items); i++)
        ended += s_ended(json_array_get(items, i));
    for (size_t i = 0; i < json_array_size(items) && ended > MERGE_QUEUE_KEEP_ENDED;) {
        if (s_ended(json_array_get(items, i))) {
            json_array_remove(items, i);
            ended--;
        } else {
            i++;
        }
    }
}

/* The item of this task: found again or queued. */
static json_t *s_enqueue(s_view_t *v, bool first)
{
    const merge_queue_request_t *req = v->req;
    json_t *item = s_find(v, req->id);
    if (item != NULL && !(s_is(item, "ejected") && s_int(item, "attempt") < req->attempt)) {
        s_set_int(item, "attempt", req->attempt);
        if (first && !s_ended(item))
            s_event(v, "merge-queue.resumed", item, "resumed in state %s", s_str(item, "state"));
        return item;
    }
    json_int_t seq = s_int(v->q, "next_seq");
    s_set_int(v->q, "next_seq", seq + 1);
    item = json_pack("{s:s, s:I, s:I, s:i, s:s, s:s, s:s, s:s, s:i, s:s, s:s, s:s, s:s, s:s, "
                     "s:i, s:s, s:s, s:I, s:I}",
                     "id", req->id, "attempt", (json_int_t)req->attempt, "seq", seq, "rank",
                     req->rank, "workspace", req->workspace, "source", req->source, "commit",
                     req->commit ? req->commit : "", "state", "waiting", "gen", 0, "base", "",
                     "candidate", "", "claim", "", "claim_kind", "", "strategy", "", "tests", 0,
                     "verdict", "", "reason", "", "enqueued_ms", (json_int_t)s_wall_ms(),
                     "ended_ms", (json_int_t)0);
    if (item == NULL)
        return NULL;
    if (req->extra != NULL)
        json_object_update_missing(item, (json_t *)req->extra);
    json_array_append_new(json_object_get(v->q, "items"), item);
    s_event(v, "merge-queue.enqueued", item, "queued (priority rank %d)", req->rank);
    return item;
}

/* ---- work -------------------------------------------------------------------------------- */

typedef struct {
    json_t *item; /* a copy, owned */
    char kind[8]; /* "build" or "test" */
    char base[41], candidate[41];
    json_int_t seq, gen;
} s_work_t;

/* Claims the first piece of work within the window. Returns true with *work filled. */
static bool s_claim(s_view_t *v, s_work_t *work)
{
    if (json_is_true(json_object_get(v->q, "paused")))
        return false;
    const char *expected = v->tip;
    size_t window = s_window(v);
    for (size_t i = 0; i < v->nactive && i < window; i++) {
        json_t *item = v->active[i];
        const char *next = s_is(item, "failed") ? expected
                           : s_is(item, "built") || s_is(item, "passed")
                               ? s_str(item, "candidate")
                               : NULL;
        bool unclaimed = s_str(item, "claim")[0] == '\0';
        const char *kind = NULL;
        if (unclaimed && s_is(item, "waiting") && expected != NULL)
            kind = "build";
        else if (unclaimed && s_is(item, "built"))
            kind = "test";
        if (kind != NULL) {
            memset(work, 0, sizeof *work);
            snprintf(work->kind, sizeof work->kind, "%s", kind);
            snprintf(work->base, sizeof work->base, "%s", expected);
            snprintf(work->candidate, sizeof work->candidate, "%s", s_str(item, "candidate"));
            if (strcmp(kind, "build") == 0)
                s_set_str(item, "base", expected);
            else {
                s_set_int(item, "tests", s_int(item, "tests") + 1);
                s_set_int(v->q, "test_runs", s_int(v->q, "test_runs") + 1);
            }
            s_set_str(item, "claim", s_claim_token);
            s_set_str(item, "claim_kind", kind);
            work->seq = s_int(item, "seq");
            work->gen = s_int(item, "gen");
            work->item = json_deep_copy(item);
            if (strcmp(kind, "build") == 0)
                s_event(v, "merge-queue.building", item, "building its candidate on %.12s",
                        expected);
            else
                s_event(v, "merge-queue.testing", item, "testing candidate %.12s (%zu ahead)",
                        work->candidate, i);
            return work->item != NULL;
        }
        expected = next;
    }
    return false;
}

/* The item `work` was claimed for, when the claim still stands. */
static json_t *s_claimed(s_view_t *v, const s_work_t *work)
{
    for (size_t i = 0; i < v->nactive; i++) {
        json_t *item = v->active[i];
        if (s_int(item, "seq") == work->seq)
            return s_int(item, "gen") == work->gen &&
                           strcmp(s_str(item, "claim"), s_claim_token) == 0
                       ? item
                       : NULL;
    }
    return NULL;
}

/* Does the work (unlocked). rc/out/reason for s_record. */
typedef struct {
    int rc;
    char out[41];
    const char *label; /* strategy or verdict */
    char *reason;
    json_t *facts;
} s_done_t;

static void s_do(const merge_queue_hooks_t *hooks, const s_work_t *work, s_done_t *done)
{
    memset(done, 0, sizeof *done);
    done->facts = json_object();
    if (strcmp(work->kind, "build") == 0)
        done->rc = hooks->build(work->item, work->base, done->out, &done->label, done->facts,
                                &done->reason, hooks->arg);
    else
        done->rc = hooks->test(work->item, work->candidate, &done->label, done->facts,
                               &done->reason, hooks->arg);
}

static void s_record(s_view_t *v, const s_work_t *work, s_done_t *done)
{
    json_t *item = s_claimed(v, work);
    if (item == NULL) {
        log_info("merge queue: the %s of item %lld is out of date (rebuilt meanwhile): dropped",
                 work->kind, (long long)work->seq);
        return;
    }
    s_set_str(item, "claim", "");
    s_set_str(item, "claim_kind", "");
    if (done->facts != NULL)
        json_object_update(item, done->facts);
    bool build = strcmp(work->kind, "build") == 0;
    if (done->rc < 0) {
        s_event(v, "merge-queue.retry", item, "%s to be tried again: %s", work->kind,
                done->reason ? done->reason : "transient failure");
        if (build)
            s_set_str(item, "base", "");
    } else if (done->rc == 1 && !build) {
        /* Ejected once everything ahead of it passed (s_normalise): until then the failure
         * may be the fault of an item ahead. */
        s_set_str(item, "state", "failed");
        s_set_str(item, "verdict", "FAIL");
        s_set_str(item, "reason", done->reason ? done->reason : "tests failed");
        s_event(v, "merge-queue.failed", item, "candidate %.12s failed its tests",
                work->candidate);
    } else if (done->rc == 1) {
        s_end(v, item, "ejected", done->reason ? done->reason : "failed");
        s_event(v, "merge-queue.ejected", item, "ejected: %s", s_str(item, "reason"));
    } else if (build) {
        s_set_str(item, "candidate", done->out);
        s_set_str(item, "strategy", done->label ? done->label : "");
        /* Nothing new on top of the base (already merged): nothing to test. */
        bool nothing = strcmp(done->out, work->base) == 0;
        s_set_str(item, "state", nothing ? "passed" : "built");
        if (nothing)
            s_set_str(item, "verdict", "SKIP");
        s_event(v, "merge-queue.built", item, "candidate %.12s (%s)", done->out,
                done->label ? done->label : "?");
    } else {
        s_set_str(item, "state", "passed");
        s_set_str(item, "verdict", done->label ? done->label : "PASS");
        s_event(v, "merge-queue.passed", item, "candidate %.12s passed its tests (%s)",
                work->candidate, s_str(item, "verdict"));
    }
}

/* Locks and reads the queue, lands what can land and brings every item in line with what
 * is ahead of it. The caller then looks, claims, and ends with s_finish_step(). */
static int s_locked_step(s_view_t *v)
{
    int rc = s_open(v);
    if (rc != 0) {
        s_close(v);
        return rc;
    }
    /* Landing first: a head whose tested candidate already is the tip (a crash between
     * its landing and the save) is recorded as landed, not rebuilt. */
    s_land(v);
    s_normalise(v);
    s_land(v);
    s_normalise(v);
    return 0;
}

/* Saves the queue and unlocks it. */
static int s_finish_step(s_view_t *v)
{
    s_trim(v);
    int rc = merge_queue_store_save(v->store);
    s_close(v);
    return rc;
}

int merge_queue_run(const merge_queue_request_t *request, const merge_queue_hooks_t *hooks,
                    merge_queue_end_t *end, json_t **item_out)
{
    *item_out = NULL;
    *end = MERGE_QUEUE_WAITING;
    int rc = s_claim_init(request->dir);
    if (rc != 0)
        return rc;
    s_view_t v = {.req = request, .hooks = hooks};
    for (bool first = true;; first = false) {
        rc = s_locked_step(&v);
        if (rc != 0)
            return rc;
        json_t *mine = s_enqueue(&v, first);
        if (mine == NULL) {
            s_close(&v);
            return failure_set(FAILURE_MEMORY, "out of memory");
        }
        if (s_sort(&v) == 0)
            s_normalise(&v);
        mine = s_find(&v, request->id);
        int stop = hooks->stop != NULL ? hooks->stop(hooks->arg) : 0;
        bool late = request->deadline_ms > 0 && clock_now_ms() >= request->deadline_ms;
        if (s_ended(mine) || stop != 0 || late) {
            if (!s_ended(mine) && stop == 2) {
                s_end(&v, mine, "ejected", "withdrawn: the task was cancelled");
                s_event(&v, "merge-queue.ejected", mine, "withdrawn: the task was cancelled");
                *end = MERGE_QUEUE_WITHDRAWN;
            } else if (s_ended(mine)) {
                *end = s_is(mine, "landed") ? MERGE_QUEUE_LANDED : MERGE_QUEUE_EJECTED;
            }
            *item_out = json_deep_copy(mine);
            return s_finish_step(&v);
        }
        s_work_t work;
        bool claimed = s_claim(&v, &work);
        rc = s_finish_step(&v);
        if (rc != 0 || !claimed) {
            if (claimed)
                json_decref(work.item);
            if (rc != 0)
                return rc;
            usleep(MERGE_QUEUE_POLL_MS * 1000);
            continue;
        }
        s_done_t done;
        s_do(hooks, &work, &done);
        rc = s_open(&v);
        if (rc == 0) {
            s_record(&v, &work, &done);
            if (s_sort(&v) == 0)
                s_normalise(&v);
            s_land(&v);
            rc = s_finish_step(&v);
        } else {
            s_close(&v);
        }
        json_decref(work.item);
        json_decref(done.facts);
        free(done.reason);
        if (rc != 0)
            return rc;
    }
}
