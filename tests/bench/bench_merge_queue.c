/* bench_merge_queue [--branches N] [--bad B] [--conflicting C] [--workers W] [--suite S]
 * [--serial]: the merge
 * queue against today's one-at-a-time merges, with real processes (the integration tests'
 * worker_harness.h: a broker, W cloister-merge workers, real repositories).
 *
 * N branches (each adding its own file; B of them also add a file named BREAK, which the
 * suite fails on; C others also write shared.c, each differently, so they conflict with one
 * another and the fake agent resolves them, keeping the branch's side) are submitted at
 * once as merge-agent tasks into main. The suite is a
 * shell script that sleeps S seconds and logs "start/pass/fail <commit>". Printed: the
 * time from the last submit until every merge was decided, merges landed and ejected,
 * suite runs spent per landed merge, and whether main's every new first-parent commit
 * passed the suite exactly as it is.
 *   (default)  [merge] queue = true, no task group: the speculative queue;
 *   --serial   [merge] queue = false, every task in group merge:<repo>:main: one at a time,
 *              as before the queue. */
#include "testgit.h"
#include "worker_harness.h"

static harness_t *s_h;
static testgit_fixture_t s_repos;
static char s_log[600];

static int s_count_lines(const char *prefix)
{
    char *log = testenv_read_file(s_log);
    int n = 0;
    for (char *line = log ? strtok(log, "\n") : NULL; line; line = strtok(NULL, "\n"))
        n += strncmp(line, prefix, strlen(prefix)) == 0;
    free(log);
    return n;
}

static bool s_logged_pass(const char *commit)
{
    char *log = testenv_read_file(s_log);
    char line[128];
    snprintf(line, sizeof line, "pass %s\n", commit);
    bool found = log != NULL && strstr(log, line) != NULL;
    free(log);
    return found;
}

int main(int argc, char **argv)
{
    int branches = 8, bad = 1, conflicting = 0, workers = 4, suite = 4;
    bool serial = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--serial") == 0)
            serial = true;
        else if (i + 1 < argc && strcmp(argv[i], "--branches") == 0)
            branches = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--bad") == 0)
            bad = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--conflicting") == 0)
            conflicting = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--workers") == 0)
            workers = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--suite") == 0)
            suite = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_merge_queue [--branches N] [--bad B] [--conflicting C] "
                            "[--workers W] [--suite S] [--serial]\n");
            return 2;
        }
    }
    if (branches < 1 || bad < 0 || conflicting < 0 || bad + conflicting > branches ||
        workers < 1 || suite < 0) {
        fprintf(stderr, "bench_merge_queue: bad numbers\n");
        return 2;
    }
    s_h = harness_new_config("bench-mq",
                             "[broker]\nretry_backoff_ms = 50\n\n[security]\nrequire_review = false\n");
    if (s_h == NULL)
        return 1;
    const char *dir = s_h->env->dir;
    char script_path[600], script[2048], config[4096], path[700];
    snprintf(s_log, sizeof s_log, "%s/tests.log", dir);
    snprintf(script_path, sizeof script_path, "%s/tests.sh", dir);
    snprintf(script, sizeof script,
             "h=$(git rev-parse HEAD)\necho \"start $h\" >> '%s'\nsleep %d\n"
             "if [ -e BREAK ]; then echo \"fail $h\" >> '%s'; echo 'FAILED test_no_break'; "
             "exit 1; fi\necho \"pass $h\" >> '%s'\necho '1 passed'\n",
             s_log, suite, s_log, s_log);
    CHECK(testenv_write_file(script_path, script) == 0);
    snprintf(config, sizeof config,
             "[broker]\nretry_backoff_ms = 50\n\n[agent]\ncommand = \"%s\"\n\n"
             "[security]\nrequire_review = false\n\n[tests]\nsandbox = \"none\"\n\n"
             "[merge]\nqueue = %s\n\n[specialists.merge-agent]\ntest_command = \"sh %s\"\n",
             testenv_bin("fake-claude"), serial ? "false" : "true", script_path);
    snprintf(path, sizeof path, "%s/cloister.toml", s_h->env->home);
    CHECK(testenv_write_file(path, config) == 0);
    snprintf(path, sizeof path, "%s/home", dir);
    testgit_env(path);
    testgit_fixture(&s_repos, dir);
    /* The bad branches are spread evenly through the queue. */
    int every = bad > 0 ? branches / bad : 0, conflicts = conflicting;
    for (int i = 0; i < branches; i++) {
        char branch[64], file[64];
        snprintf(branch, sizeof branch, "feature/b%d", i);
        snprintf(file, sizeof file, "f%d.c", i);
        bool breaks = bad > 0 && i % every == every / 2 && i / every < bad;
        testgit_push_branch(s_repos.user, branch, breaks ? "BREAK" : file, "int x;\n");
        if (!breaks && conflicting > 0) {
            /* One more commit on the branch: shared.c, as no other branch writes it. */
            char text[64];
            snprintf(text, sizeof text, "int shared = %d;\n", i);
            CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", branch, NULL), 0);
            testgit_commit(s_repos.user, "shared.c", text, "shared");
            CHECK_INT(testgit_run(s_repos.user, "push", "-q", "origin", branch, NULL), 0);
            CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "main", NULL), 0);
            conflicting--;
        }
    }
    /* The fake agent resolves every conflict keeping the branch's side. */
    snprintf(path, sizeof path, "%s/actions.txt", dir);
    CHECK(testenv_write_file(path, "resolve-all theirs\nsay MERGE_RESULT: SUCCESS\n") == 0);
    setenv("FAKE_CLAUDE_ACTIONS", path, 1);
    snprintf(path, sizeof path, "%s/claude", dir);
    setenv("CLAUDE_CONFIG_DIR", path, 1);
    char old[41];
    testgit_rev(s_repos.remote, "refs/heads/main", old);
    for (int i = 0; i < workers; i++) {
        char id[32];
        snprintf(id, sizeof id, "merge-%d", i + 1);
        harness_service(s_h, "cloister-merge", id, 2000, NULL);
    }
    char group[700] = "";
    if (serial) {
        char root[600];
        CHECK(realpath(s_repos.user, root) != NULL);
        snprintf(group, sizeof group, "merge:%s:main", root);
    }
    for (int i = 0; i < branches; i++) {
        wire_writer_t *w = wire_writer_new();
        char id[32], payload[1200];
        snprintf(id, sizeof id, "b%d", i);
        snprintf(payload, sizeof payload,
                 "{\"workspace\": \"%s\", \"branch\": \"feature/b%d\", \"target\": \"main\"}",
                 s_repos.user, i);
        wire_writer_start(w, MSG_SUBMIT);
        wire_put_str(w, FIELD_ID, id);
        wire_put_str(w, FIELD_SPECIALIST, "merge-agent");
        wire_put_str(w, FIELD_TITLE, id);
        wire_put_int(w, FIELD_TIMEOUT_S, 3600);
        if (group[0] != '\0')
            wire_put_str(w, FIELD_GROUP, group);
        json_t *p = json_loads(payload, 0, NULL);
        msgjson_put(w, "payload", p);
        json_decref(p);
        size_t len = 0;
        const void *data = wire_writer_data(w, &len);
        CHECK(zmq_send(s_h->push, data, len, 0) == (int)len);
        wire_writer_destroy(&w);
    }
    int64_t start = clock_now_ms();
    int landed = 0, ejected = 0;
    for (int i = 0; i < branches; i++) {
        char id[32];
        snprintf(id, sizeof id, "b%d", i);
        for (;;) {
            if (harness_find(s_h, 0, "task.done", id) >= 0) {
                landed++;
                break;
            }
            if (harness_find(s_h, 0, "task.failed", id) >= 0 ||
                harness_find(s_h, 0, "task.dead", id) >= 0) {
                ejected++;
                break;
            }
            harness_pump(s_h, 20);
        }
    }
    int64_t elapsed = clock_now_ms() - start;
    char range[100];
    snprintf(range, sizeof range, "%s..refs/heads/main", old);
    CHECK_INT(testgit_run(s_repos.remote, "rev-list", "--first-parent", range, NULL), 0);
    char *list = strdup(testgit_out());
    int first_parents = 0, untested = 0;
    for (char *c = strtok(list, "\n"); c != NULL; c = strtok(NULL, "\n")) {
        first_parents++;
        untested += !s_logged_pass(c);
    }
    free(list);
    int runs = s_count_lines("start ");
    printf("%-10s branches %d (bad %d, conflicting %d), workers %d, suite %d s: all decided in "
           "%.1f s; landed %d, ejected %d; suite runs %d = %.2f per landed merge; main's %d new "
           "first-parent commits: %d not tested as they are\n",
           serial ? "serial" : "queue", branches, bad, conflicts, workers, suite,
           elapsed / 1000.0, landed,
           ejected, runs, landed ? (double)runs / landed : 0.0, first_parents, untested);
    harness_destroy(&s_h);
    return check_exit_code("bench_merge_queue") != 0 || untested != 0;
}
