/* merge_service: the merge-agent job (see merge_service.h for the contract).
 *
 * One task is one merge_job_t on the job thread's stack: the payload, the deadline, the
 * callbacks' shared state (what the agent said and cost) and the engine's result. The
 * engine drives; this file supplies its callbacks (progress, resolve, run_tests,
 * cancelled), decides the outcome and writes the result fields and the history line. */
#include "merge_service.h"

#include "merge_credentials.h"
#include "merge_engine.h"
#include "merge_queue.h"
#include "merge_queue_store.h"

#include "agent_job.h"
#include "clock.h"
#include "failure.h"
#include "fence.h"
#include "log.h"
#include "markers.h"
#include "prompt.h"
#include "repository.h"
#include "run_network.h"
#include "sandbox.h"
#include "session.h"
#include "testdetect.h"
#include "testrun.h"
#include "worktree.h"

#include <git2.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Test output quoted in the notes when the tests fail. */
#define S_TEST_TAIL 600

struct merge_service_t {
    const config_t *config; /* borrowed */
    sandbox_t *sandbox;     /* how the merged tree's tests run */
    char workdir[AGENT_JOB_WORKDIR_SIZE];
    char worktree_dir[AGENT_JOB_WORKDIR_SIZE + 16];
    const char *remote;       /* [merge] remote (owned by the config) */
    int push_retries;         /* [merge] push_retries */
    bool push;                /* [merge] push: false merges onto the local target only */
    bool queue;               /* [merge] queue: merges go through the merge queue */
    int queue_window;         /* [merge] queue_window */
    char queue_dir[AGENT_JOB_WORKDIR_SIZE + 16]; /* merge_queue_store_dir() */
    const char *test_command; /* configured test command, or NULL to detect */
    char control_endpoint[1024]; /* the broker's, for the fence before a push */
    merge_repos_t *repos; /* each workspace's repository, kept open from task to task */
};

/* One merge. */
typedef struct {
    merge_service_t *service;
    specialist_ctx_t *ctx;
    const char *workspace, *source, *target, *remote, *issue;
    const char *commit; /* payload "commit": the reviewed source commit, or NULL */
    int64_t deadline_ms;
    bool agent_ran;   /* the agent was started (its result fields are set) */
    bool fenced;      /* the fence refused a push: this attempt no longer holds the task */
    char *agent_said; /* the agent's MERGE_RESULT ("" when it gave none) */
} merge_job_t;

/* Takes every setting read at each merge from `config` (borrowed from now on): the
 * sandbox first, so that a refused one leaves `self` as it was. */
static int s_read_settings(merge_service_t *self, const config_t *config)
{
    sandbox_t *sandbox = NULL;
    int rc = sandbox_new(&sandbox, config);
    if (rc != 0)
        return rc;
    sandbox_destroy(&self->sandbox);
    self->sandbox = sandbox;
    self->config = config;
    self->remote = config_string(config, "merge", "remote", MERGE_ENGINE_DEFAULT_REMOTE);
    self->push_retries =
        (int)config_int(config, "merge", "push_retries", MERGE_ENGINE_DEFAULT_PUSH_RETRIES);
    self->push = config_bool(config, "merge", "push", true);
    self->queue = config_bool(config, "merge", "queue", true);
    self->queue_window = (int)config_int(config, "merge", "queue_window",
                                         MERGE_QUEUE_DEFAULT_WINDOW);
    self->test_command = config_specialist_test_command(config, MERGE_SERVICE_SPECIALIST);
    if (self->test_command == NULL || self->test_command[0] == '\0')
        self->test_command = config_specialist_test_command(config, "test-agent");
    if (self->test_command != NULL && self->test_command[0] == '\0')
        self->test_command = NULL;
    return 0;
}

int merge_service_new(merge_service_t **out, const config_t *config)
{
    *out = NULL;
    merge_service_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    int rc =
        agent_job_workdir(self->workdir, sizeof self->workdir, config, MERGE_SERVICE_SPECIALIST);
    if (rc != 0) {
        free(self);
        return rc;
    }
    snprintf(self->worktree_dir, sizeof self->worktree_dir, "%s/merges", self->workdir);
    rc = merge_queue_store_dir(self->queue_dir, sizeof self->queue_dir);
    if (rc != 0) {
        free(self);
        return rc;
    }
    snprintf(self->control_endpoint, sizeof self->control_endpoint, "%s",
             config_string(config, "broker", "control", "tcp://127.0.0.1:5562"));
    rc = s_read_settings(self, config);
    if (rc == 0) {
        rc = merge_repos_new(&self->repos);
        if (rc != 0)
            sandbox_destroy(&self->sandbox);
    }
    if (rc != 0) {
        free(self);
        return rc;
    }
    *out = self;
    return 0;
}

int merge_service_reload(merge_service_t *self, const config_t *config)
{
    return s_read_settings(self, config);
}

void merge_service_destroy(merge_service_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    sandbox_destroy(&(*self_p)->sandbox);
    merge_repos_destroy(&(*self_p)->repos);
    free(*self_p);
    *self_p = NULL;
}

const char *merge_service_workdir(const merge_service_t *self)
{
    return self->workdir;
}

/* ---- engine callbacks ------------------------------------------------------------------ */

static void s_progress(const char *text, void *arg)
{
    merge_job_t *job = arg;
    specialist_progress(job->ctx, "info", text);
}

static bool s_cancelled(void *arg)
{
    merge_job_t *job = arg;
    return specialist_cancelled(job->ctx);
}

/* The push (or the landing on the local target) happens only while this attempt still
 * holds the task (fence.h). */
static int s_before_push(bool remote, void *arg)
{
    merge_job_t *job = arg;
    if (remote)
        specialist_progressf(job->ctx, "phase", "pushing to %s/%s", job->remote, job->target);
    else
        specialist_progressf(job->ctx, "phase", "landing on the local '%s'", job->target);
    int rc = fence_check(job->ctx, job->service->control_endpoint, FENCE_DEFAULT_WAIT_MS);
    job->fenced = rc != 0;
    if (rc == 0)
        specialist_progress(job->ctx, "info", "the broker confirms this attempt holds the task");
    return rc;
}

/* "a.c, b.c" of the n files, or NULL when out of memory (caller frees). */
static char *s_join(const char *const *files, size_t n)
{
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += strlen(files[i]) + 2;
    char *text = malloc(len);
    if (text == NULL)
        return NULL;
    text[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            strcat(text, ", ");
        strcat(text, files[i]);
    }
    return text;
}

/* The test command for the project in `dir` (configured or detected), for the prompt. */
static void s_prompt_test_command(const merge_job_t *job, const char *dir, char *buf, size_t size)
{
    testdetect_t detect;
    if (testdetect_find(&detect, dir, job->service->test_command) == 0)
        snprintf(buf, size, "%s", detect.command);
    else
        snprintf(buf, size, "(none detected)");
}

/* The agent's run limit: the seconds left before the engine's deadline (at least 1). */
static int s_seconds_left(const merge_job_t *job)
{
    int64_t left = job->deadline_ms - clock_now_ms();
    return left >= 2000 ? (int)(left / 1000) : 1;
}

/* "- a.c\n- b.c" for the prompt, or NULL when out of memory (caller frees). */
static char *s_file_lines(const char *const *files, size_t n)
{
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += strlen(files[i]) + 3;
    char *text = malloc(len);
    if (text == NULL)
        return NULL;
    size_t used = 0;
    for (size_t i = 0; i < n; i++)
        used += (size_t)sprintf(text + used, "%s- %s", i > 0 ? "\n" : "", files[i]);
    text[used] = '\0';
    return text;
}

/* Renders prompts/merge-agent.md for the conflicts `files` (n) in `worktree`. Returns 0
 * and *out (caller frees), or a FAILURE_* with the reason. */
static int s_render_prompt(merge_job_t *job, const char *worktree, const char *const *files,
                           size_t n, char **out)
{
    *out = NULL;
    char dir[PATH_MAX];
    int rc = prompt_dir(dir, sizeof dir, job->service->config, CLOISTER_PROMPTS_DIR);
    if (rc != 0)
        return rc;
    char test_command[sizeof((testdetect_t *)0)->command];
    s_prompt_test_command(job, worktree, test_command, sizeof test_command);
    char *lines = s_file_lines(files, n);
    template_vars_t *vars = template_vars_new();
    if (lines == NULL || vars == NULL) {
        free(lines);
        template_vars_destroy(&vars);
        return failure_set(FAILURE_MEMORY, "out of memory");
    }
    const char *values[][2] = {
        {"project", job->workspace}, {"source_branch", job->source}, {"target_branch", job->target},
        {"conflict_files", lines},   {"issue", job->issue},          {"test_command", test_command},
        {"worktree", worktree},
    };
    for (size_t i = 0; i < sizeof values / sizeof values[0] && rc == 0; i++)
        if (values[i][1][0] != '\0')
            rc = template_vars_set(vars, values[i][0], values[i][1]);
    if (rc == 0)
        rc = prompt_build(out, job->service->config, dir, MERGE_SERVICE_SPECIALIST,
                          specialist_task(job->ctx)->json, vars);
    template_vars_destroy(&vars);
    free(lines);
    return rc;
}

/* What the agent's answer says: its MERGE_RESULT (copied into job->agent_said) and its
 * NOTES (a malloc'd note for the engine, or NULL). */
static char *s_read_answer(merge_job_t *job, const char *text)
{
    markers_t *markers = NULL;
    markers_parse(&markers, text, "MERGE_RESULT", NULL);
    const char *said = markers ? markers_get(markers, "MERGE_RESULT") : NULL;
    const char *notes = markers ? markers_get(markers, "NOTES") : NULL;
    free(job->agent_said);
    job->agent_said = strdup(said ? said : "");
    char *note = NULL;
    if (notes != NULL && notes[0] != '\0' && asprintf(&note, "agent: %s", notes) < 0)
        note = NULL;
    markers_destroy(&markers);
    return note;
}

/* The engine's resolver: the agent resolves the conflicts in `worktree`. Returns 0 when
 * the agent finished (the engine verifies), 1 when it gave up or failed. */
static int s_resolve(const char *worktree, const char *const *files, size_t n, char **notes_out,
                     void *arg)
{
    merge_job_t *job = arg;
    /* The phase pan status, pan specialists list and the dashboard show while it lasts. */
    specialist_progressf(job->ctx, "phase", "resolving conflicts in %zu file%s", n,
                         n == 1 ? "" : "s");
    char *prompt = NULL;
    int rc = s_render_prompt(job, worktree, files, n, &prompt);
    if (rc != 0) {
        if (asprintf(notes_out, "cannot build the merge prompt: %s", failure_message()) < 0)
            *notes_out = NULL;
        return 1;
    }
    agent_job_settings_t settings;
    rc = agent_job_settings_from_config(&settings, job->service->config, MERGE_SERVICE_SPECIALIST,
                                        job->service->workdir);
    if (rc == 0)
        rc = agent_job_settings_add_dir(&settings, worktree);
    agent_run_t *run = NULL;
    if (rc == 0) {
        int left = s_seconds_left(job);
        if (settings.agent.timeout_s <= 0 || settings.agent.timeout_s > left)
            settings.agent.timeout_s = left;
        job->agent_ran = true;
        rc = agent_job_run(&run, job->ctx, &settings, prompt);
    }
    free(prompt);
    if (rc != 0) {
        if (asprintf(notes_out, "cannot run the agent: %s", failure_message()) < 0)
            *notes_out = NULL;
        return 1;
    }
    const agent_outcome_t *outcome = agent_run_outcome(run);
    int gave_up = 0;
    if (!outcome->ok) {
        const char *why = outcome->timed_out   ? "timed out"
                          : outcome->cancelled ? "was stopped"
                                               : "failed";
        if (asprintf(notes_out, "the agent %s: %s", why, outcome->error) < 0)
            *notes_out = NULL;
        gave_up = 1;
    } else {
        *notes_out = s_read_answer(job, outcome->result_text);
        if (strcmp(job->agent_said, "FAILURE") == 0)
            gave_up = 1;
    }
    agent_run_destroy(&run);
    return gave_up;
}

/* A short summary of a test run for the notes. Returns malloc'd text or NULL. */
static char *s_test_summary(const char *command, const testrun_result_t *run,
                            testrun_verdict_t verdict)
{
    char counts[128] = "";
    if (run->passed >= 0 || run->failed >= 0)
        snprintf(counts, sizeof counts, " (%ld passed, %ld failed)", run->passed, run->failed);
    char how[320];
    if (!run->started)
        snprintf(how, sizeof how, "could not start: %s", run->error);
    else if (run->timed_out)
        snprintf(how, sizeof how, "timed out after %lld ms", (long long)run->duration_ms);
    else if (run->term_signal != 0)
        snprintf(how, sizeof how, "killed by signal %d", run->term_signal);
    else
        snprintf(how, sizeof how, "exit code %d", run->exit_code);
    char *failures =
        run->nfailures > 0 ? s_join((const char *const *)run->failures, run->nfailures) : NULL;
    const char *tail = "";
    if (verdict != TESTRUN_PASS && failures == NULL && run->output_len > 0)
        tail = run->output_len > S_TEST_TAIL ? run->output + run->output_len - S_TEST_TAIL
                                             : run->output;
    char *text = NULL;
    if (asprintf(&text, "tests `%s`: %s, %s%s%s%s%s%s", command, testrun_verdict_name(verdict), how,
                 counts, failures ? "; failing: " : "", failures ? failures : "",
                 tail[0] ? "; output: " : "", tail) < 0)
        text = NULL;
    free(failures);
    return text;
}

/* The engine's test runner: the project's tests in the merged worktree. */
static merge_tests_t s_run_tests(const char *worktree, char **summary_out, void *arg)
{
    merge_job_t *job = arg;
    testdetect_t detect;
    int rc = testdetect_find(&detect, worktree, job->service->test_command);
    if (rc == FAILURE_NOT_FOUND) {
        specialist_progress(job->ctx, "info", "no test command found: TESTS SKIP");
        if (asprintf(summary_out, "tests skipped: %s", failure_message()) < 0)
            *summary_out = NULL;
        return MERGE_TESTS_SKIP;
    }
    int64_t left = job->deadline_ms - clock_now_ms();
    if (rc != 0 || left <= 0) {
        if (asprintf(summary_out, "tests not run: %s",
                     rc != 0 ? failure_message() : "no time left before the deadline") < 0)
            *summary_out = NULL;
        return MERGE_TESTS_FAIL;
    }
    specialist_progress(job->ctx, "phase", "running the tests on the merge");
    specialist_progressf(job->ctx, "info", "running tests: %s (%s)", detect.command, detect.reason);
    run_network_t network = {.config = job->service->config, .sandbox = job->service->sandbox,
                             .workspace = job->workspace, .target = job->target,
                             .section = "tests", .result_key = "tests_network",
                             .what = "tests"};
    bool allowed = run_network_decide(job->ctx, &network);
    /* With the job attached, a cancel stops the tests. */
    testrun_options_t options = {.command = detect.command,
                                 .dir = worktree,
                                 .timeout_ms = left,
                                 .owner = specialist_testrun_owner(job->ctx),
                                 .sandbox = job->service->sandbox,
                                 .network = allowed};
    testrun_result_t *run = NULL;
    testrun_run(&run, &options);
    if (run == NULL) {
        *summary_out = strdup("tests not run: out of memory");
        return MERGE_TESTS_FAIL;
    }
    testrun_verdict_t verdict = testrun_verdict(run);
    *summary_out = s_test_summary(detect.command, run, verdict);
    testrun_result_destroy(&run);
    /* An error (timeout, crash, no test output) is no evidence the merge works. */
    return verdict == TESTRUN_PASS ? MERGE_TESTS_PASS : MERGE_TESTS_FAIL;
}

/* ---- did the merge reach the remote anyway? -------------------------------------------- */

/* Fetches `target` of the remote `remote_name` of `repo` into its remote-tracking ref and
 * writes that ref's name into *ref (caller frees); with no such remote (or `remote_name`
 * NULL) writes "refs/heads/<target>" and fetches nothing. Returns 0 or a negative libgit2
 * code / -1 (out of memory). */
static int s_fetch_target(git_repository *repo, const char *remote_name, const char *target,
                          char **ref)
{
    *ref = NULL;
    git_remote *remote = NULL;
    char *spec = NULL;
    int rc = remote_name ? git_remote_lookup(&remote, repo, remote_name) : GIT_ENOTFOUND;
    if (rc == GIT_ENOTFOUND) {
        rc = asprintf(ref, "refs/heads/%s", target) < 0 ? -1 : 0;
    } else if (rc == 0) {
        if (asprintf(&spec, "+refs/heads/%s:refs/remotes/%s/%s", target, remote_name, target) < 0 ||
            asprintf(ref, "refs/remotes/%s/%s", remote_name, target) < 0) {
            rc = -1;
        } else {
            git_strarray specs = {&spec, 1};
            git_fetch_options opts;
            git_fetch_options_init(&opts, GIT_FETCH_OPTIONS_VERSION);
            merge_credentials_t credentials = {0};
            opts.callbacks.credentials = merge_credentials_acquire;
            opts.callbacks.payload = &credentials;
            opts.update_fetchhead = 0;
            opts.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
            rc = git_remote_fetch(remote, &specs, &opts, "cloister merge-agent: check");
        }
    }
    if (rc < 0) {
        free(*ref);
        *ref = NULL;
    }
    free(spec);
    git_remote_free(remote);
    return rc;
}

/* 1 when the target branch of the repository at `repo_path` -- on `remote_name` (fetched
 * now), or the local branch when there is no such remote or `remote_name` is NULL -- is
 * `commit_hex` or contains it; 0 when not; a negative FAILURE_* when it cannot be told.
 * *on_remote says which of the two was looked at. */
static int s_target_contains(const char *repo_path, const char *remote_name, const char *target,
                             const char *commit_hex, bool *on_remote)
{
    git_libgit2_init();
    git_repository *repo = NULL;
    char *ref = NULL;
    git_oid commit, tip;
    int rc = FAILURE_GIT;
    if (git_oid_fromstr(&commit, commit_hex) < 0 ||
        git_repository_open_ext(&repo, repo_path, 0, NULL) < 0 ||
        s_fetch_target(repo, remote_name, target, &ref) < 0 ||
        git_reference_name_to_id(&tip, repo, ref) < 0)
        goto out;
    *on_remote = strncmp(ref, "refs/remotes/", 13) == 0;
    rc = git_oid_equal(&tip, &commit) || git_graph_descendant_of(repo, &tip, &commit) == 1;
out:
    if (rc < 0) {
        const git_error *e = git_error_last();
        failure_set(FAILURE_GIT, "cannot read the target: %s",
                    e && e->message ? e->message : "out of memory");
    }
    free(ref);
    git_repository_free(repo);
    git_libgit2_shutdown();
    return rc;
}

/* ---- outcome --------------------------------------------------------------------------- */

static bool s_starts_with(const char *text, const char *prefix)
{
    return text != NULL && strncmp(text, prefix, strlen(prefix)) == 0;
}

/* Transient infrastructure trouble, worth another attempt later: the remote unreachable
 * (the engine's transport failures), a repository busy with a fresh lock, I/O, memory.
 * A push the remote rejected is final (FAILURE_STATE): "push to <remote> rejected: ..." is
 * a refusal that does not depend on the target moving (hook, branch protection,
 * permissions), and the engine has already retried the rejections caused by the target
 * moving ("push rejected N time(s), the target kept moving"). */
static bool s_transient(int rc, const char *reason)
{
    static const char *const transport[] = {"cannot reach the remote",
                                            "cannot list the remote's branches", "fetch failed",
                                            "push failed"};
    if (rc == FAILURE_IO || rc == FAILURE_MEMORY)
        return true;
    if (rc == FAILURE_STATE && s_starts_with(reason, "repository busy"))
        return true;
    if (rc != FAILURE_GIT)
        return false;
    for (size_t i = 0; i < sizeof transport / sizeof transport[0]; i++)
        if (s_starts_with(reason, transport[i]))
            return true;
    return false;
}

static json_t *s_files_json(char **files, size_t n)
{
    json_t *array = json_array();
    for (size_t i = 0; i < n && array != NULL; i++)
        json_array_append_new(array, json_string(files[i]));
    return array;
}

/* The merge-agent's half of the review gate (broker_gate.c): a merge no review vouches for
 * (no payload.merge_base, not forced, reviews required) goes on only into a target commit
 * whose review mode -- its own .cloister/config.toml, else [review] mode -- is "disabled".
 * Read at the very commit merged into, so a target that moved since the mode was reported
 * decides by what it says now. Reports the mode and the commit in the result. */
static int s_check_unreviewed(const char *target_commit, void *arg)
{
    merge_job_t *job = arg;
    char mode[16], why[600] = "";
    if (repository_review_mode(job->service->config, job->workspace, target_commit, mode,
                               sizeof mode) != 0)
        snprintf(why, sizeof why, " (%s)", failure_message());
    specialist_result_str(job->ctx, "review_mode", mode);
    specialist_result_str(job->ctx, "review_mode_at", target_commit);
    if (why[0] == '\0' && strcmp(mode, "disabled") == 0) {
        specialist_progressf(job->ctx, "info",
                             "no review: the review mode at '%s' (commit %.12s) is disabled",
                             job->target, target_commit);
        return 0;
    }
    return failure_set(FAILURE_DENIED,
                       "no review opened the gate for this merge (it carries no "
                       "payload.merge_base), and the review mode at '%s' (commit %.12s) is "
                       "\"%s\"%s: the merge is held; review the branch, then pan approve",
                       job->target, target_commit, mode, why);
}

/* ---- the merge queue (merge_queue.h) ---------------------------------------------------- */

/* Sets refs/<name> of the repository at `path` to `hex` (force), or deletes it when `hex` is
 * NULL. Returns 0 or FAILURE_GIT with the reason. */
static int s_ref(merge_job_t *job, const char *path, const char *name, const char *hex)
{
    merge_repo_t *lent = NULL;
    int rc = merge_repos_get(job->service->repos, path, &lent);
    if (rc != 0)
        return rc;
    git_oid oid;
    git_reference *ref = NULL;
    if (hex != NULL) {
        rc = git_oid_fromstr(&oid, hex) < 0
                 ? -1
                 : git_reference_create(&ref, lent->repo, name, &oid, 1, "cloister merge queue");
    } else {
        rc = git_reference_lookup(&ref, lent->repo, name);
        rc = rc == GIT_ENOTFOUND ? 0 : rc < 0 ? rc : git_reference_delete(ref);
    }
    git_reference_free(ref);
    merge_repos_put(job->service->repos, &lent);
    if (rc < 0) {
        const git_error *e = git_error_last();
        return failure_set(FAILURE_GIT, "cannot %s %s: %s", hex ? "set" : "delete", name,
                           e && e->message ? e->message : "?");
    }
    return 0;
}

/* Whether the job's repository lands through a remote (as merge_engine decides). */
static bool s_queue_remote(merge_job_t *job, git_repository *repo)
{
    git_remote *remote = NULL;
    if (!job->service->push || git_remote_lookup(&remote, repo, job->remote) < 0)
        return false;
    git_remote_free(remote);
    return true;
}

static int s_queue_tip(char out[41], void *arg)
{
    merge_job_t *job = arg;
    merge_repo_t *lent = NULL;
    int rc = merge_repos_get(job->service->repos, job->workspace, &lent);
    if (rc != 0)
        return rc;
    char name[1200];
    if (s_queue_remote(job, lent->repo))
        snprintf(name, sizeof name, "refs/remotes/%s/%s", job->remote, job->target);
    else
        snprintf(name, sizeof name, "refs/heads/%s", job->target);
    git_oid oid;
    rc = git_reference_name_to_id(&oid, lent->repo, name);
    merge_repos_put(job->service->repos, &lent);
    if (rc < 0)
        return failure_set(FAILURE_NOT_FOUND, "target branch '%s' not found (%s)", job->target,
                           name);
    git_oid_tostr(out, 41, &oid);
    return 0;
}

/* The ref an item's candidate is kept under for inspection. */
static void s_candidate_ref(char *buf, size_t size, const merge_job_t *job, const json_t *item)
{
    snprintf(buf, size, "refs/cloister-queue/%s/%lld", job->target,
             (long long)json_integer_value(json_object_get(item, "seq")));
}

/* `files` (n) as a JSON array in facts[key]. */
static void s_fact_files(json_t *facts, const char *key, char **files, size_t n)
{
    json_object_set_new(facts, key, s_files_json(files, n));
}

static int s_queue_build(const json_t *item, const char *base, char out[41], const char **strategy,
                         json_t *facts, char **reason, void *arg)
{
    merge_job_t *job = arg;
    const char *workspace = json_string_value(json_object_get(item, "workspace"));
    const char *source = json_string_value(json_object_get(item, "source"));
    const char *commit = json_string_value(json_object_get(item, "commit"));
    long long seq = (long long)json_integer_value(json_object_get(item, "seq"));
    /* The engine merges into a branch: a temporary one at the base. */
    char branch[128], ref[160];
    snprintf(branch, sizeof branch, "cloister-queue-build-%d-%lld", (int)getpid(), seq);
    snprintf(ref, sizeof ref, "refs/heads/%s", branch);
    int rc = s_ref(job, workspace, ref, base);
    if (rc != 0) {
        *reason = strdup(failure_message());
        return rc;
    }
    /* The agent's prompt names this item's branch, whichever task builds it. */
    const char *own_source = job->source;
    job->source = source;
    merge_request_t request;
    merge_request_init(&request);
    request.repo_path = workspace;
    request.repos = job->service->repos;
    request.source_branch = source;
    request.source_commit = commit && commit[0] ? commit : NULL;
    request.target_branch = branch;
    request.message_target = job->target;
    request.first_parent_tested = true;
    request.push = false;
    request.push_retries = 0;
    request.deadline_ms = job->deadline_ms;
    request.worktree_dir = job->service->worktree_dir;
    request.progress = s_progress;
    request.resolve = s_resolve;
    request.cancelled = s_cancelled;
    request.callback_arg = job;
    /* The merge-agent's half of the review gate, as for a merge without the queue: the
     * candidate ahead contains the target, so it contains the reviewed merge base too. */
    const char *reviewed = json_string_value(json_object_get(item, "merge_base"));
    if (!json_is_true(json_object_get(item, "forced")) &&
        config_bool(job->service->config, "security", "require_review", true)) {
        if (reviewed != NULL && reviewed[0] != '\0')
            request.reviewed_base = reviewed;
        else
            request.check_target = s_check_unreviewed;
    }
    merge_result_t result;
    free(job->agent_said);
    job->agent_said = NULL;
    rc = merge_engine_run(&request, &result);
    job->source = own_source;
    s_ref(job, workspace, ref, NULL);
    s_fact_files(facts, "resolved_files", result.resolved_files, result.resolved_count);
    s_fact_files(facts, "failed_files", result.failed_files, result.failed_count);
    if (result.notes != NULL)
        json_object_set_new(facts, "notes", json_string(result.notes));
    if (job->agent_said != NULL && job->agent_said[0] != '\0')
        json_object_set_new(facts, "agent_merge_result", json_string(job->agent_said));
    if (rc == 0) {
        memcpy(out, result.merge_commit, 41);
        *strategy = merge_strategy_name(result.strategy);
        char keep[1200];
        s_candidate_ref(keep, sizeof keep, job, item);
        rc = s_ref(job, workspace, keep, out);
        if (rc != 0)
            *reason = strdup(failure_message());
    } else {
        const char *why = result.reason ? result.reason : "merge failed";
        bool transient = s_transient(rc, why) || specialist_cancelled(job->ctx);
        if (asprintf(reason, "%s%s", transient ? "" : "cannot build the candidate: ", why) < 0)
            *reason = NULL;
        rc = transient ? (rc < 0 ? rc : FAILURE_STATE) : 1;
    }
    merge_result_clear(&result);
    return rc;
}

static int s_queue_test(const json_t *item, const char *candidate, const char **verdict,
                        json_t *facts, char **reason, void *arg)
{
    merge_job_t *job = arg;
    const char *workspace = json_string_value(json_object_get(item, "workspace"));
    merge_repo_t *lent = NULL;
    int rc = merge_repos_get(job->service->repos, workspace, &lent);
    git_oid oid;
    worktree_t *tree = NULL;
    if (rc == 0 && git_oid_fromstr(&oid, candidate) < 0)
        rc = failure_set(FAILURE_INVALID, "bad candidate id %s", candidate);
    if (rc == 0)
        rc = worktree_add(&tree, lent->repo, job->service->worktree_dir, &oid);
    if (rc != 0) {
        *reason = strdup(failure_message());
        merge_repos_put(job->service->repos, &lent);
        return rc;
    }
    specialist_progressf(job->ctx, "info", "testing candidate %.12s of '%s'", candidate,
                         json_string_value(json_object_get(item, "source")));
    char *summary = NULL;
    merge_tests_t tests = s_run_tests(worktree_path(tree), &summary, job);
    worktree_destroy(&tree);
    merge_repos_put(job->service->repos, &lent);
    if (specialist_cancelled(job->ctx)) {
        free(summary);
        *reason = strdup("the tests were stopped");
        return FAILURE_STATE;
    }
    *verdict = merge_tests_name(tests);
    if (summary != NULL)
        json_object_set_new(facts, "test_notes", json_string(summary));
    if (tests != MERGE_TESTS_FAIL) {
        free(summary);
        return 0;
    }
    char keep[1200];
    s_candidate_ref(keep, sizeof keep, job, item);
    if (asprintf(reason, "tests failed on candidate %.12s (%s + the items ahead + '%s', kept as %s): %s",
                 candidate, job->target, json_string_value(json_object_get(item, "source")),
                 keep, summary ? summary : "?") < 0)
        *reason = NULL;
    free(summary);
    return 1;
}

static int s_queue_land(const json_t *item, const char *base, const char *candidate,
                        json_t *facts, char **reason, void *arg)
{
    merge_job_t *job = arg;
    (void)base; /* the engine checks the target is an ancestor of the candidate */
    const char *workspace = json_string_value(json_object_get(item, "workspace"));
    char branch[128], ref[160];
    snprintf(branch, sizeof branch, "cloister-queue-land-%d", (int)getpid());
    snprintf(ref, sizeof ref, "refs/heads/%s", branch);
    int rc = s_ref(job, workspace, ref, candidate);
    if (rc != 0) {
        *reason = strdup(failure_message());
        return rc;
    }
    merge_request_t request;
    merge_request_init(&request);
    request.repo_path = workspace;
    request.repos = job->service->repos;
    request.source_branch = branch;
    request.source_commit = candidate;
    request.target_branch = job->target;
    request.remote_name = job->remote;
    request.push = job->service->push;
    request.push_retries = 0;
    request.fast_forward_only = true;
    request.deadline_ms = job->deadline_ms;
    request.worktree_dir = job->service->worktree_dir;
    request.progress = s_progress;
    request.cancelled = s_cancelled;
    request.before_push = s_before_push;
    request.callback_arg = job;
    merge_result_t result;
    job->fenced = false;
    rc = merge_engine_run(&request, &result);
    s_ref(job, workspace, ref, NULL);
    if (rc == 0) {
        char keep[1200];
        s_candidate_ref(keep, sizeof keep, job, item);
        s_ref(job, workspace, keep, NULL);
        json_object_set_new(facts, "local_target", json_string(merge_local_name(result.local)));
        json_object_set_new(facts, "landed", json_string(merge_landed_name(result.landed)));
        if (result.local_note != NULL)
            json_object_set_new(facts, "local_note", json_string(result.local_note));
    } else {
        const char *why = result.reason ? result.reason : "landing failed";
        *reason = strdup(why);
        /* A stale attempt (fenced) or a stopped one lands nothing and changes nothing: as
         * if the target moved, the queue only looks again. */
        if (strstr(why, "not a fast-forward") != NULL || strstr(why, "kept moving") != NULL ||
            job->fenced || specialist_cancelled(job->ctx))
            rc = 1;
        else if (!s_transient(rc, why))
            rc = 2;
    }
    merge_result_clear(&result);
    return rc;
}

static void s_queue_event(const char *kind, const char *text, void *arg)
{
    merge_job_t *job = arg;
    specialist_progress(job->ctx, kind, text);
}

static int s_queue_stop(void *arg)
{
    merge_job_t *job = arg;
    if (!specialist_cancelled(job->ctx))
        return 0;
    return specialist_cancel_reason(job->ctx) == SPECIALIST_CANCEL_REQUESTED ? 2 : 1;
}

/* The strategy named `name` (merge_strategy_name). */
static merge_strategy_t s_strategy(const char *name)
{
    for (int s = MERGE_STRATEGY_NONE; s <= MERGE_STRATEGY_RESOLVED; s++)
        if (name != NULL && strcmp(merge_strategy_name((merge_strategy_t)s), name) == 0)
            return (merge_strategy_t)s;
    return MERGE_STRATEGY_NONE;
}

/* The strings of the JSON array `files` into *out (n of them; owned by the result). */
static void s_files_from_json(const json_t *files, char ***out, size_t *n)
{
    size_t count = json_array_size(files);
    *out = count ? calloc(count, sizeof **out) : NULL;
    *n = 0;
    for (size_t i = 0; *out != NULL && i < count; i++) {
        const char *file = json_string_value(json_array_get(files, i));
        if (file != NULL && ((*out)[*n] = strdup(file)) != NULL)
            (*n)++;
    }
}

/* item[key] or "", and "; " after it when it is not empty. */
static const char *s_item_str(const json_t *item, const char *key)
{
    const char *value = json_string_value(json_object_get(item, key));
    return value ? value : "";
}

static const char *s_item_sep(const json_t *item, const char *key)
{
    return s_item_str(item, key)[0] != '\0' ? "; " : "";
}

/* The merge through the queue of its target: fills `result` from the item's end. */
static int s_queue_merge(merge_job_t *job, merge_result_t *result, bool *waiting)
{
    *waiting = false;
    const specialist_task_t *task = specialist_task(job->ctx);
    char root[PATH_MAX];
    repository_root(job->workspace, root, sizeof root);
    const char *merge_base = specialist_payload_str(job->ctx, "merge_base");
    json_t *extra = json_pack(
        "{s:s, s:b}", "merge_base", merge_base ? merge_base : "", "forced",
        json_is_true(json_object_get(task->payload_json, "force")));
    merge_queue_request_t request = {.extra = extra,
                                     .dir = job->service->queue_dir,
                                     .repo = root,
                                     .target = job->target,
                                     .id = task->id,
                                     .attempt = task->attempt,
                                     .rank = merge_queue_rank(task->priority),
                                     .workspace = job->workspace,
                                     .source = job->source,
                                     .commit = job->commit,
                                     .window = job->service->queue_window,
                                     .deadline_ms = job->deadline_ms};
    merge_queue_hooks_t hooks = {.tip = s_queue_tip,
                                 .build = s_queue_build,
                                 .test = s_queue_test,
                                 .land = s_queue_land,
                                 .event = s_queue_event,
                                 .stop = s_queue_stop,
                                 .arg = job};
    specialist_progressf(job->ctx, "phase", "merging '%s' into '%s'", job->source, job->target);
    /* The queue reads the remote's target from its remote-tracking ref: fresh from here. */
    merge_repo_t *lent = NULL;
    if (merge_repos_get(job->service->repos, job->workspace, &lent) == 0) {
        char *ref = NULL;
        if (s_queue_remote(job, lent->repo) &&
            s_fetch_target(lent->repo, job->remote, job->target, &ref) < 0)
            specialist_progressf(job->ctx, "info", "cannot fetch %s/%s: %s", job->remote,
                                 job->target,
                                 git_error_last() ? git_error_last()->message : "?");
        free(ref);
        merge_repos_put(job->service->repos, &lent);
    }
    merge_queue_end_t end;
    json_t *item = NULL;
    int rc = merge_queue_run(&request, &hooks, &end, &item);
    json_decref(extra);
    if (rc != 0) {
        result->reason = strdup(failure_message());
        return rc;
    }
    const char *candidate = json_string_value(json_object_get(item, "candidate"));
    const char *verdict = json_string_value(json_object_get(item, "verdict"));
    const char *why = json_string_value(json_object_get(item, "reason"));
    result->strategy = s_strategy(json_string_value(json_object_get(item, "strategy")));
    snprintf(result->merge_commit, sizeof result->merge_commit, "%s", candidate ? candidate : "");
    result->tests = verdict && strcmp(verdict, "PASS") == 0   ? MERGE_TESTS_PASS
                    : verdict && strcmp(verdict, "FAIL") == 0 ? MERGE_TESTS_FAIL
                                                              : MERGE_TESTS_SKIP;
    s_files_from_json(json_object_get(item, "resolved_files"), &result->resolved_files,
                      &result->resolved_count);
    s_files_from_json(json_object_get(item, "failed_files"), &result->failed_files,
                      &result->failed_count);
    const char *said = json_string_value(json_object_get(item, "agent_merge_result"));
    if (said != NULL && (job->agent_said == NULL || job->agent_said[0] == '\0')) {
        free(job->agent_said);
        job->agent_said = strdup(said);
    }
    long long runs = (long long)json_integer_value(json_object_get(item, "tests"));
    long long waited = (long long)(json_integer_value(json_object_get(item, "ended_ms")) -
                                   json_integer_value(json_object_get(item, "enqueued_ms")));
    specialist_result_int(job->ctx, "queue_seq", json_integer_value(json_object_get(item, "seq")));
    specialist_result_int(job->ctx, "queue_test_runs", runs);
    if (end == MERGE_QUEUE_LANDED) {
        const char *base = json_string_value(json_object_get(item, "base"));
        const char *local = json_string_value(json_object_get(item, "local_target"));
        const char *note = json_string_value(json_object_get(item, "local_note"));
        result->success = true;
        const char *where = json_string_value(json_object_get(item, "landed"));
        bool moved = candidate != NULL && base != NULL && strcmp(candidate, base) != 0;
        result->landed = !moved || where == NULL          ? MERGE_LANDED_NONE
                         : strcmp(where, "remote") == 0 ? MERGE_LANDED_REMOTE
                                                        : MERGE_LANDED_LOCAL;
        result->pushed = result->landed == MERGE_LANDED_REMOTE;
        for (int l = MERGE_LOCAL_NONE; local != NULL && l <= MERGE_LOCAL_DIVERGED; l++)
            if (strcmp(merge_local_name((merge_local_t)l), local) == 0)
                result->local = (merge_local_t)l;
        result->local_note = note ? strdup(note) : NULL;
        if (asprintf(&result->notes, "%s%s%s%slanded through the merge queue after %lld ms, "
                     "%lld test run(s)", s_item_str(item, "notes"), s_item_sep(item, "notes"),
                     s_item_str(item, "test_notes"), s_item_sep(item, "test_notes"), waited,
                     runs) < 0)
            result->notes = NULL;
        specialist_result_int(job->ctx, "queue_ms", waited);
        rc = 0;
    } else if (end == MERGE_QUEUE_EJECTED || end == MERGE_QUEUE_WITHDRAWN) {
        if (strstr(why ? why : "", "tests failed") != NULL)
            result->tests = MERGE_TESTS_FAIL;
        result->reason = strdup(why && why[0] ? why : "ejected from the merge queue");
        if (asprintf(&result->notes, "%s%s%s", s_item_str(item, "notes"),
                     s_item_sep(item, "notes"), s_item_str(item, "test_notes")) < 0)
            result->notes = NULL;
        rc = FAILURE_STATE;
        *waiting = json_integer_value(json_object_get(item, "retry")) != 0;
    } else {
        *waiting = true;
        result->reason = strdup("still in the merge queue (deadline or shutdown): tried again");
        rc = FAILURE_TIMEOUT;
    }
    json_decref(item);
    return rc;
}

/* What became of the merge, for the log and the history: the outcome, or "released" /
 * "cancelled" when the skeleton drops the job's result (SIGTERM, a broker cancel). */
static const char *s_outcome_name(const specialist_ctx_t *ctx, specialist_outcome_t outcome)
{
    specialist_cancel_t why = specialist_cancel_reason(ctx);
    if (outcome != SPECIALIST_DONE && why == SPECIALIST_CANCEL_SHUTDOWN)
        return "released";
    if (outcome != SPECIALIST_DONE && why == SPECIALIST_CANCEL_REQUESTED)
        return "cancelled";
    return outcome == SPECIALIST_DONE ? "done" : outcome == SPECIALIST_RETRY ? "retry" : "failed";
}

/* Sets the result fields and the error. */
static void s_report(merge_job_t *job, const merge_result_t *result)
{
    specialist_ctx_t *ctx = job->ctx;
    merge_marker_t markers[MERGE_MARKER_COUNT];
    if (merge_result_markers(result, markers) == 0) {
        specialist_result_str(ctx, "MERGE_RESULT", markers[0].value);
        specialist_result_str(ctx, "TESTS", markers[3].value);
        specialist_result_str(ctx, "NOTES", markers[4].value);
        merge_markers_clear(markers);
    }
    json_t *resolved = s_files_json(result->resolved_files, result->resolved_count);
    json_t *failed = s_files_json(result->failed_files, result->failed_count);
    specialist_result_json(ctx, "RESOLVED_FILES", resolved);
    specialist_result_json(ctx, "FAILED_FILES", failed);
    json_decref(resolved);
    json_decref(failed);
    specialist_result_str(ctx, "merge_commit", result->merge_commit);
    specialist_result_str(ctx, "strategy", merge_strategy_name(result->strategy));
    specialist_result_bool(ctx, "pushed", result->pushed);
    specialist_result_str(ctx, "landed", merge_landed_name(result->landed));
    specialist_result_str(ctx, "local_target", merge_local_name(result->local));
    if (result->local_note != NULL)
        specialist_result_str(ctx, "local_note", result->local_note);
    specialist_result_int(ctx, "attempts", result->attempts);
    specialist_result_str(ctx, "repository", job->workspace);
    specialist_result_str(ctx, "source", job->source);
    specialist_result_str(ctx, "target", job->target);
    specialist_result_int(ctx, "preflight_ms", result->preflight_ms);
    specialist_result_int(ctx, "analysis_ms", result->analysis_ms);
    specialist_result_int(ctx, "resolve_ms", result->resolve_ms);
    specialist_result_int(ctx, "tests_ms", result->tests_ms);
    specialist_result_int(ctx, "push_ms", result->push_ms);
    specialist_result_int(ctx, "total_ms", result->total_ms);
    if (job->agent_said != NULL && job->agent_said[0] != '\0')
        specialist_result_str(ctx, "agent_merge_result", job->agent_said);
    if (!result->success)
        specialist_result_error(ctx, "%s", result->reason ? result->reason : "merge failed");
}

/* The payload's override record ({by, at, reason, review}: a person merged over a blocked
 * review gate, see pan approve --force), or NULL. A bare payload.force = true counts as an
 * override by an unknown person. */
static const json_t *s_override(specialist_ctx_t *ctx)
{
    const json_t *payload = specialist_task(ctx)->payload_json;
    const json_t *override = json_object_get(payload, "override");
    if (json_is_object(override))
        return override;
    return json_is_true(json_object_get(payload, "force")) ? json_object_get(payload, "force")
                                                            : NULL;
}

/* Says, in the task's events and its result, that this merge overrides a review gate. */
static void s_report_override(specialist_ctx_t *ctx)
{
    const json_t *override = s_override(ctx);
    if (override == NULL)
        return;
    const char *by = json_string_value(json_object_get(override, "by"));
    const char *at = json_string_value(json_object_get(override, "at"));
    const char *reason = json_string_value(json_object_get(override, "reason"));
    specialist_progressf(ctx, "review.overridden",
                         "merging although the review gate may be blocked "
                         "(forced by %s at %s: %s)",
                         by ? by : "an unknown user", at ? at : "an unknown time",
                         reason ? reason : "payload.force");
    specialist_result_json(ctx, "override", (json_t *)override);
}

/* Appends the merge's line to specialists/merge-agent/history.jsonl. */
static void s_history(const merge_job_t *job, const merge_result_t *result,
                      specialist_outcome_t outcome)
{
    const specialist_task_t *task = specialist_task(job->ctx);
    json_t *entry = json_pack(
        "{s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:b, s:s, s:s, s:o, s:o, "
        "s:s?, s:s?, s:i, s:I, s:b}",
        "kind", "merge", "task", task->id, "attempt", (json_int_t)task->attempt, "issue",
        job->issue, "repository", job->workspace, "source", job->source, "target", job->target,
        "MERGE_RESULT", result->success ? "SUCCESS" : "FAILURE", "outcome",
        s_outcome_name(job->ctx, outcome), "strategy", merge_strategy_name(result->strategy),
        "merge_commit", result->merge_commit, "pushed", result->pushed, "landed",
        merge_landed_name(result->landed), "TESTS",
        merge_tests_name(result->tests), "resolved_files",
        s_files_json(result->resolved_files, result->resolved_count), "failed_files",
        s_files_json(result->failed_files, result->failed_count), "reason", result->reason, "notes",
        result->notes, "attempts", result->attempts, "duration_ms", (json_int_t)result->total_ms,
        "agent", job->agent_ran);
    const json_t *override = s_override(job->ctx);
    if (entry != NULL && override != NULL)
        json_object_set(entry, "override", (json_t *)override);
    if (entry == NULL || session_history_append(MERGE_SERVICE_SPECIALIST, entry) != 0)
        log_error("task %s: cannot append to the merge history: %s", task->id,
                  entry ? failure_message() : "out of memory");
    json_decref(entry);
}

/* Reads and checks the payload into job. Returns 0 or FAILURE_INVALID with the reason. */
static int s_read_payload(merge_job_t *job)
{
    specialist_ctx_t *ctx = job->ctx;
    const char *issue = specialist_payload_str(ctx, "issueId");
    const char *remote = specialist_payload_str(ctx, "remote");
    const char *target = specialist_payload_str(ctx, "target");
    const char *workspace = specialist_payload_str(ctx, "workspace");
    const char *source = specialist_payload_str(ctx, "branch");
    job->commit = specialist_payload_str(ctx, "commit");
    job->workspace = workspace ? workspace : "";
    job->source = source ? source : "";
    job->target = target && target[0] ? target : MERGE_ENGINE_DEFAULT_TARGET;
    job->remote = remote && remote[0] ? remote : job->service->remote;
    job->issue = issue && issue[0] ? issue : specialist_task(ctx)->issue;
    if (job->workspace[0] == '\0')
        return failure_set(FAILURE_INVALID, "payload: 'workspace' (the repository) is required");
    if (job->workspace[0] != '/')
        return failure_set(FAILURE_INVALID,
                           "payload: 'workspace' must be an absolute path, not '%s'",
                           job->workspace);
    if (job->source[0] == '\0')
        return failure_set(FAILURE_INVALID, "payload: 'branch' (the source branch) is required");
    return 0;
}

specialist_outcome_t merge_service_job(specialist_ctx_t *ctx, void *service)
{
    const specialist_task_t *task = specialist_task(ctx);
    merge_job_t job = {.service = service, .ctx = ctx};
    int64_t lease_ms = task->timeout_s * 1000;
    int64_t margin = lease_ms / 10;
    if (margin < MERGE_SERVICE_MARGIN_MIN_MS)
        margin = MERGE_SERVICE_MARGIN_MIN_MS;
    if (margin > MERGE_SERVICE_MARGIN_MAX_MS)
        margin = MERGE_SERVICE_MARGIN_MAX_MS;
    job.deadline_ms = clock_now_ms() + (lease_ms > 2 * margin ? lease_ms - margin : lease_ms / 2);

    merge_result_t result;
    memset(&result, 0, sizeof result);
    int rc = s_read_payload(&job);
    bool queued = false, waiting = false;
    if (rc != 0) {
        result.reason = strdup(failure_message());
    } else if (job.service->queue) {
        queued = true;
        s_report_override(ctx);
        specialist_progressf(ctx, "info", "merging '%s' into '%s' of %s through the merge queue",
                             job.source, job.target, job.workspace);
        rc = s_queue_merge(&job, &result, &waiting);
    } else {
        if (task->group[0] == '\0')
            specialist_progress(ctx, "info",
                                "warning: this task has no group; merges into the same target "
                                "may race (submit with group merge:<repository>:<target>)");
        s_report_override(ctx);
        specialist_progressf(ctx, "phase", "merging '%s' into '%s'", job.source, job.target);
        specialist_progressf(ctx, "info", "merging '%s' into '%s' of %s", job.source, job.target,
                             job.workspace);
        merge_request_t request;
        merge_request_init(&request);
        request.repo_path = job.workspace;
        request.repos = job.service->repos;
        request.source_branch = job.source;
        request.source_commit = job.commit;
        request.target_branch = job.target;
        request.remote_name = job.remote;
        request.push = job.service->push;
        request.push_retries = job.service->push_retries;
        request.deadline_ms = job.deadline_ms;
        request.worktree_dir = job.service->worktree_dir;
        request.progress = s_progress;
        request.resolve = s_resolve;
        request.run_tests = s_run_tests;
        request.cancelled = s_cancelled;
        request.before_push = s_before_push;
        request.callback_arg = &job;
        bool forced = json_is_true(json_object_get(task->payload_json, "force"));
        const char *base = specialist_payload_str(ctx, "merge_base");
        if (!forced && config_bool(job.service->config, "security", "require_review", true)) {
            if (base != NULL && base[0] != '\0')
                request.reviewed_base = base;
            else
                request.check_target = s_check_unreviewed;
        }
        rc = merge_engine_run(&request, &result);
    }

    /* A merge that did happen is never reported as failed. */
    if (!queued && rc != 0 && result.landed == MERGE_LANDED_NONE &&
        result.merge_commit[0] != '\0' &&
        (rc == FAILURE_TIMEOUT || rc == FAILURE_GIT || specialist_cancelled(ctx))) {
        bool on_remote = false;
        int contains = s_target_contains(job.workspace, job.service->push ? job.remote : NULL,
                                         job.target, result.merge_commit, &on_remote);
        if (contains == 1) {
            specialist_progressf(ctx, "info", "%s%s%s already contains %s: the merge happened",
                                 on_remote ? job.remote : "the local ", on_remote ? "/" : "",
                                 job.target, result.merge_commit);
            char *note = NULL;
            if (asprintf(&note, "merged although the run ended with: %s",
                         result.reason ? result.reason : "?") >= 0) {
                free(result.reason);
                result.reason = NULL;
                free(result.notes);
                result.notes = note;
            }
            result.success = true;
            result.pushed = on_remote;
            result.landed = on_remote ? MERGE_LANDED_REMOTE : MERGE_LANDED_LOCAL;
            rc = 0;
        } else if (contains < 0) {
            log_warn("task %s: %s", task->id, failure_message());
        }
    }

    specialist_outcome_t outcome = SPECIALIST_DONE;
    if (rc != 0)
        outcome = s_transient(rc, result.reason) ? SPECIALIST_RETRY : SPECIALIST_FAILED;
    if (waiting)
        outcome = SPECIALIST_RETRY;
    s_report(&job, &result);
    s_history(&job, &result, outcome);
    log_info("task %s attempt %lld: %s (%s)%s%s", task->id, (long long)task->attempt,
             s_outcome_name(ctx, outcome), merge_strategy_name(result.strategy),
             result.reason ? ": " : "", result.reason ? result.reason : "");
    merge_result_clear(&result);
    free(job.agent_said);
    return outcome;
}
