/* review_harness: what the test_review_* and test_runtime_* integration tests share
 * (included by each, so every function is static). Built on worker_harness.h: a real
 * cloister-broker in a testenv directory, events recorded from its PUB socket. On top:
 * a cloister.toml whose [agent] command is fake-claude, HOME / CLAUDE_CONFIG_DIR /
 * PANOPTICON_HOME inside the test directory, FAKE_CLAUDE_LOG recording every agent
 * invocation, a real git repository (main + a feature branch, made with the git CLI), and
 * cloister-review instances started and stopped by the test. fake-claude reads its
 * FAKE_CLAUDE_* knobs from the environment, which a service passes on to the agent, so a
 * test sets them before starting a service. */
#ifndef CLOISTER_REVIEW_HARNESS_H
#define CLOISTER_REVIEW_HARNESS_H

#include "testgit.h"
#include "worker_harness.h"

#include <dirent.h>
#include <sys/wait.h>

typedef struct {
    harness_t *h;
    char repo[512];    /* the git repository: main, and feature with src/db.c changed */
    char workdir[512]; /* the review agent's fixed workdir */
    char log[512];     /* FAKE_CLAUDE_LOG */
} review_env_t;

static inline void review_clear_fake_env(void)
{
    unsetenv("FAKE_CLAUDE_SCENARIO");
    unsetenv("FAKE_CLAUDE_RESULT");
    unsetenv("FAKE_CLAUDE_DELAY_MS");
    unsetenv("FAKE_CLAUDE_ACTIONS");
}

/* Runs a shell script in the test directory; true when it exits 0. */
static inline bool review_sh(review_env_t *r, const char *script)
{
    char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
    char out[4096];
    int code = testenv_run(r->h->env, argv, out, sizeof out, 20000);
    if (code != 0)
        fprintf(stderr, "script failed (%d): %s\n%s\n", code, script, out);
    return code == 0;
}

/* Writes cloister.toml: the fake agent and `extra` (more TOML, may be NULL). */
static inline void review_config(review_env_t *r, const char *extra)
{
    char path[600], text[4096];
    snprintf(path, sizeof path, "%s/cloister.toml", r->h->env->home);
    snprintf(text, sizeof text,
             "[broker]\nretry_backoff_ms = 50\n\n"
             "[agent]\ncommand = \"%s\"\nno_output_timeout = 60\nresult_grace_ms = 1000\n\n%s",
             testenv_bin("fake-claude"), extra ? extra : "");
    CHECK(testenv_write_file(path, text) == 0);
}

/* The environment: broker, config, directories, the repository. NULL on failure. */
static inline void review_dump(review_env_t *r);

/* check_on_fail()'s hook: a failing check prints what the services did. */
static inline void review_dump_hook(void *arg)
{
    review_dump(arg);
}

static inline review_env_t *review_env_new(const char *name)
{
    review_env_t *r = calloc(1, sizeof *r);
    r->h = harness_new(name);
    if (r->h == NULL) {
        free(r);
        return NULL;
    }
    const char *dir = r->h->env->dir;
    char path[600];
    snprintf(path, sizeof path, "%s/userhome", dir);
    testgit_env(path);
    snprintf(path, sizeof path, "%s/claude", dir);
    setenv("CLAUDE_CONFIG_DIR", path, 1);
    snprintf(r->log, sizeof r->log, "%s/fake.log", dir);
    setenv("FAKE_CLAUDE_LOG", r->log, 1);
    setenv("IS_SANDBOX", "1", 1);
    review_clear_fake_env();
    check_on_fail(review_dump_hook, r);
    snprintf(r->repo, sizeof r->repo, "%s/repo", dir);
    snprintf(r->workdir, sizeof r->workdir, "%s/agentwork", dir);
    review_config(r, NULL);
    /* main with src/db.c (node_modules/ is ignored), feature changing src/db.c. */
    CHECK(testgit_run(dir, "init", "-q", "-b", "main", r->repo, NULL) == 0);
    snprintf(path, sizeof path, "%s/node_modules/dep/index.js", r->repo);
    CHECK(testenv_write_file(path, "x\n") == 0);
    testgit_commit(r->repo, ".gitignore", "node_modules\n", "ignore node_modules");
    testgit_commit(r->repo, "src/db.c", "int query(void) { return 0; }\n", "base");
    CHECK(testgit_run(r->repo, "checkout", "-q", "-b", "feature", NULL) == 0);
    testgit_commit(r->repo, "src/db.c",
                   "int query(const char *name) { return run(\"SELECT * WHERE n=\" name); }\n",
                   "query by name");
    CHECK(testgit_run(r->repo, "checkout", "-q", "main", NULL) == 0);
    char feature[41];
    testgit_rev(r->repo, "feature", feature);
    CHECK(feature[0] != '\0');
    return r;
}

/* Prints the recorded events and the services' logs (for a failing test). */
static inline void review_dump(review_env_t *r)
{
    for (int i = 0; i < r->h->nevents; i++) {
        char *text = json_dumps(r->h->events[i], JSON_COMPACT);
        fprintf(stderr, "event: %s\n", text ? text : "?");
        free(text);
    }
    char script[700];
    snprintf(script, sizeof script, "cat '%s'/review-*.log >&2", r->h->env->dir);
    review_sh(r, script);
}

static inline void review_env_destroy(review_env_t **r_p)
{
    review_env_t *r = *r_p;
    if (r == NULL)
        return;
    check_on_fail(NULL, NULL);
    harness_destroy(&r->h);
    free(r);
    *r_p = NULL;
    review_clear_fake_env();
}

/* Starts a specialist service (`program`, e.g. cloister-review or cloister-test) as
 * worker `id` and waits until the broker announced it. The review-agent gets the fixed
 * workdir (--workdir); other services use their default. */
static inline pid_t review_start_program(review_env_t *r, const char *program, const char *id)
{
    const char *const workdir[] = {"--workdir", r->workdir, NULL};
    bool review = strcmp(program, "cloister-review") == 0;
    return harness_service(r->h, program, id, 3000, review ? workdir : NULL);
}

/* Starts cloister-review as worker `id`. */
static inline pid_t review_start(review_env_t *r, const char *id)
{
    return review_start_program(r, "cloister-review", id);
}

/* SIGTERM to the service; waits for it to exit. Returns its exit status or -1. */
static inline int review_stop(review_env_t *r, pid_t pid)
{
    kill(pid, SIGTERM);
    return testenv_wait(r->h->env, pid, 10000);
}

/* Submits a review task for the feature branch; `extra` is more JSON payload members
 * (",\"k\":v" form, may be NULL). */
static inline void review_submit(review_env_t *r, const char *id, int timeout_s, const char *extra)
{
    char payload[4096];
    snprintf(payload, sizeof payload,
             "{\"workspace\":\"%s\",\"branch\":\"feature\",\"target\":\"main\","
             "\"issueId\":\"PAN-7\"%s}",
             r->repo, extra ? extra : "");
    harness_submit(r->h, id, "review-agent", "normal", timeout_s, 1, payload);
}

/* The FAKE_CLAUDE_LOG lines, as JSON objects (caller frees with json_decref each), at most
 * max; returns how many. */
static inline int review_log(review_env_t *r, json_t **lines, int max)
{
    char *text = testenv_read_file(r->log);
    int n = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line && n < max;
         line = strtok(NULL, "\n")) {
        json_t *entry = json_loads(line, 0, NULL);
        if (entry != NULL)
            lines[n++] = entry;
    }
    free(text);
    return n;
}

/* The argv element after `flag` in a log line, or "". */
static inline const char *review_log_arg(const json_t *line, const char *flag)
{
    const json_t *argv = json_object_get(line, "argv");
    for (size_t i = 0; i + 1 < json_array_size(argv); i++)
        if (strcmp(json_string_value(json_array_get(argv, i)), flag) == 0)
            return json_string_value(json_array_get(argv, i + 1));
    return "";
}

/* The result map of a task.done / task.failed event. */
static inline const json_t *review_result(const json_t *event)
{
    return json_object_get(event, "result");
}

/* Pids of live (not zombie) processes whose environment has our PANOPTICON_HOME, other
 * than `except1` and `except2`: processes the services under test left behind. */
static inline int review_leftovers(review_env_t *r, pid_t except1, pid_t except2)
{
    char needle[700];
    int needle_len = snprintf(needle, sizeof needle, "PANOPTICON_HOME=%s", r->h->env->home);
    int found = 0;
    DIR *proc = opendir("/proc");
    struct dirent *entry;
    while (proc != NULL && (entry = readdir(proc)) != NULL) {
        pid_t pid = (pid_t)atoi(entry->d_name);
        if (pid <= 0 || pid == getpid() || pid == except1 || pid == except2 ||
            harness_pid_gone(pid))
            continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
        FILE *f = fopen(path, "rb");
        if (f == NULL)
            continue;
        static char env[1 << 16];
        size_t len = fread(env, 1, sizeof env - 1, f);
        fclose(f);
        env[len] = '\0';
        for (size_t i = 0; i + (size_t)needle_len <= len; i += strlen(env + i) + 1) {
            if (strncmp(env + i, needle, (size_t)needle_len) == 0 &&
                (env[i + needle_len] == '\0')) {
                fprintf(stderr, "leftover process %d\n", (int)pid);
                found++;
                break;
            }
        }
    }
    if (proc != NULL)
        closedir(proc);
    return found;
}

#endif
