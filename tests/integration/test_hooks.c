/* test_hooks: cloister-hooks end to end. A real broker, real cloister-workers standing in
 * for the merge-agent, test-agent and review-agent (their results are KEY: value lines), a
 * real cloister-hooks, and a small HTTP server (python3, on a port the system picks) that
 * answers the first POST with 500 and the others with 200, checking each signature.
 *
 * Checked: after_merge gets the result in its environment and the event as JSON on stdin
 * (and nothing of the task is run as shell); a failing after_test and a hanging
 * after_review are reported in the task's events and stop nothing; the webhook is signed
 * (HMAC-SHA256 of the body with the secret), retried with backoff under one delivery id,
 * and every delivery is a task.note event of its task; a task that ends while cloister-hooks
 * is down is delivered when it starts again (the cursor). */
#include "worker_harness.h"

static harness_t *s_h;

/* The webhook receiver: saves each request as req-N.json {headers, body, valid}, answers
 * 500 to the first and 200 to the others. argv: port file, directory, secret. */
static const char *s_server =
    "import hashlib, hmac, http.server, json, os, sys\n"
    "port_file, out, secret = sys.argv[1], sys.argv[2], sys.argv[3].encode()\n"
    "count = [0]\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_POST(self):\n"
    "        body = self.rfile.read(int(self.headers['Content-Length']))\n"
    "        want = 'sha256=' + hmac.new(secret, body, hashlib.sha256).hexdigest()\n"
    "        got = self.headers.get('X-Cloister-Signature-256', '')\n"
    "        record = {'headers': dict(self.headers), 'body': json.loads(body),\n"
    "                  'valid': hmac.compare_digest(want, got)}\n"
    "        with open(os.path.join(out, 'req-%d.json' % count[0]), 'w') as f:\n"
    "            json.dump(record, f)\n"
    "        self.send_response(500 if count[0] == 0 else 200)\n"
    "        count[0] += 1\n"
    "        self.send_header('Content-Length', '0')\n"
    "        self.end_headers()\n"
    "    def log_message(self, *args):\n"
    "        pass\n"
    "server = http.server.HTTPServer(('127.0.0.1', 0), H)\n"
    "with open(port_file + '.new', 'w') as f:\n"
    "    f.write(str(server.server_address[1]))\n"
    "os.rename(port_file + '.new', port_file)\n"
    "server.serve_forever()\n";

static bool s_exists(void *path)
{
    return access(path, F_OK) == 0;
}

/* Starts the receiver; returns its port. */
static int s_start_server(void)
{
    CHECK(testenv_write_file(harness_path(s_h, "server.py"), s_server) == 0);
    char script[600], port_file[600], dir[600];
    snprintf(script, sizeof script, "%s", harness_path(s_h, "server.py"));
    snprintf(port_file, sizeof port_file, "%s", harness_path(s_h, "server.port"));
    snprintf(dir, sizeof dir, "%s", s_h->env->dir);
    char *argv[] = {"/usr/bin/python3", script, port_file, dir, "s3cret", NULL};
    CHECK(testenv_spawn(s_h->env, "server", argv) > 0);
    CHECK(testenv_wait_until(s_exists, port_file, 10000));
    char *text = testenv_read_file(port_file);
    int port = text ? atoi(text) : 0;
    free(text);
    CHECK(port > 0);
    return port;
}

/* Starts cloister-hooks and waits until it has its cursor (from then on every ended task
 * is delivered). */
static pid_t s_start_hooks(void)
{
    char *argv[] = {(char *)testenv_bin("cloister-hooks"), NULL};
    pid_t pid = testenv_spawn(s_h->env, "hooks", argv);
    CHECK(pid > 0);
    char cursor[600];
    snprintf(cursor, sizeof cursor, "%s/hooks/cursor", s_h->env->home);
    CHECK(testenv_wait_until(s_exists, cursor, 10000));
    return pid;
}

/* The text of the task.note event of `task` whose kind is `kind` and whose text holds
 * `words`, waiting up to timeout_ms; NULL when none came. */
static const char *s_note(const char *task, const char *kind, const char *words, int timeout_ms)
{
    for (int waited = 0; waited <= timeout_ms; waited += 20) {
        for (int i = 0; (i = harness_find(s_h, i, "task.note", task)) >= 0; i++) {
            const json_t *event = s_h->events[i];
            if (strcmp(harness_field(event, "kind"), kind) == 0 &&
                strstr(harness_field(event, "text"), words) != NULL)
                return harness_field(event, "text");
        }
        harness_pump(s_h, 20);
    }
    fprintf(stderr, "no task.note of %s (%s) saying '%s'\n", task, kind, words);
    return NULL;
}

/* A saved webhook request, or NULL (caller decrefs). */
static json_t *s_request(int n)
{
    char name[32];
    snprintf(name, sizeof name, "req-%d.json", n);
    return json_load_file(harness_path(s_h, name), 0, NULL);
}

static const char *s_header(const json_t *request, const char *name)
{
    return harness_field(json_object_get(request, "headers"), name);
}

int main(void)
{
    s_h = harness_new("hooks");
    CHECK(s_h != NULL);
    int port = s_start_server();
    char config[4096];
    const char *dir = s_h->env->dir;
    snprintf(config, sizeof config,
             "[broker]\nretry_backoff_ms = 50\n\n[security]\nrequire_review = false\n\n"
             "[hooks]\n"
             "after_merge = \"cat > '%s/merge-stdin.json'; env | grep ^CLOISTER_ | sort > "
             "'%s/merge-env.txt'\"\n"
             "after_test = \"echo the tracker is down >&2; exit 3\"\n"
             "after_review = \"sleep 30\"\n"
             "timeout_s = 2\n"
             "webhook = \"http://127.0.0.1:%d/cloister\"\n"
             "webhook_secret = \"s3cret\"\n"
             "webhook_attempts = 3\n"
             "webhook_backoff_ms = 200\n",
             dir, dir, port);
    char path[600];
    snprintf(path, sizeof path, "%s/cloister.toml", s_h->env->home);
    CHECK(testenv_write_file(path, config) == 0);
    pid_t hooks = s_start_hooks();

    char merge_script[600];
    snprintf(merge_script, sizeof merge_script,
             "echo 'MERGE_RESULT: SUCCESS'; echo 'NOTES: $(touch %s/pwned) `touch %s/pwned`'",
             dir, dir);
    harness_worker(s_h, "merge-1", "merge-agent", merge_script);
    harness_worker(s_h, "test-1", "test-agent", "echo 'TEST_RESULT: FAIL'; exit 1");

    /* The merge: after_merge and the webhook (refused once, then delivered). */
    harness_submit(s_h, "m-1", "merge-agent", NULL, 30, 1, "{\"issueId\": \"PAN-9\"}");
    CHECK(harness_wait(s_h, "task.done", "m-1", 10000) != NULL);
    CHECK(s_note("m-1", "hook.after_merge", "after_merge hook ran: exit 0", 10000) != NULL);
    char *env = testenv_read_file(harness_path(s_h, "merge-env.txt"));
    CHECK(env != NULL);
    static const char *const vars[] = {
        "CLOISTER_HOOK=after_merge\n",  "CLOISTER_TASK_ID=m-1\n",
        "CLOISTER_EVENT=task.done\n",   "CLOISTER_TASK_STATE=done\n",
        "CLOISTER_ISSUE=PAN-9\n",       "CLOISTER_SPECIALIST=merge-agent\n",
        "CLOISTER_VERDICT=merged\n",    "CLOISTER_RESULT_MERGE_RESULT=SUCCESS\n"};
    for (size_t i = 0; env != NULL && i < sizeof vars / sizeof vars[0]; i++)
        CHECK(strstr(env, vars[i]) != NULL);
    if (env != NULL && strstr(env, "CLOISTER_RESULT_MERGE_RESULT=SUCCESS") == NULL)
        fprintf(stderr, "the hook's environment:\n%s\n", env);
    free(env);
    json_t *stdin_json = json_load_file(harness_path(s_h, "merge-stdin.json"), 0, NULL);
    CHECK(stdin_json != NULL);
    CHECK_STR(harness_field(stdin_json, "task"), "m-1");
    CHECK_STR(harness_field(stdin_json, "event"), "task.done");
    CHECK_STR(harness_field(json_object_get(stdin_json, "result"), "MERGE_RESULT"), "SUCCESS");
    json_decref(stdin_json);
    CHECK(access(harness_path(s_h, "pwned"), F_OK) != 0);

    CHECK(s_note("m-1", "webhook", "webhook attempt 1 of 3 failed: HTTP 500; next in 200 ms",
                 10000) != NULL);
    CHECK(s_note("m-1", "webhook", "webhook delivered: HTTP 200 (attempt 2 of 3)", 10000) != NULL);
    json_t *first = s_request(0), *second = s_request(1);
    CHECK(first != NULL && second != NULL);
    CHECK(json_is_true(json_object_get(first, "valid")));
    CHECK(json_is_true(json_object_get(second, "valid")));
    CHECK_STR(s_header(first, "X-Cloister-Event"), "task.done");
    CHECK(s_header(first, "X-Cloister-Delivery")[0] != '\0');
    CHECK_STR(s_header(second, "X-Cloister-Delivery"), s_header(first, "X-Cloister-Delivery"));
    CHECK_STR(s_header(first, "Content-Type"), "application/json");
    const json_t *body = json_object_get(second, "body");
    CHECK_STR(harness_field(body, "task"), "m-1");
    CHECK_STR(harness_field(body, "verdict"), "merged");
    CHECK_STR(harness_field(json_object_get(body, "result"), "MERGE_RESULT"), "SUCCESS");
    json_decref(first);
    json_decref(second);

    /* A failing hook: reported in the task's events, and the webhook still goes. */
    harness_submit(s_h, "t-1", "test-agent", NULL, 30, 1, NULL);
    CHECK(harness_wait(s_h, "task.failed", "t-1", 10000) != NULL);
    const char *text = s_note("t-1", "hook.after_test", "after_test hook failed: exit 3", 10000);
    CHECK(text != NULL && strstr(text, "the tracker is down") != NULL);
    CHECK(s_note("t-1", "webhook", "webhook delivered: HTTP 200 (attempt 1 of 3)", 10000) != NULL);

    /* A task that ends while cloister-hooks is down is delivered when it is back. A review
     * whose hook hangs past timeout_s is killed and reported. */
    kill(hooks, SIGTERM);
    CHECK(testenv_wait(s_h->env, hooks, 10000) >= 0);
    harness_worker(s_h, "review-1", "review-agent", "echo 'GATE: open'");
    harness_submit(s_h, "r-1", "review-agent", NULL, 30, 1, NULL);
    CHECK(harness_wait(s_h, "task.done", "r-1", 10000) != NULL);
    testenv_sleep_ms(300);
    CHECK_INT(harness_count(s_h, "task.note", "r-1"), 0);
    hooks = s_start_hooks();
    CHECK(s_note("r-1", "hook.after_review", "after_review hook failed: killed after the 2 s limit",
                 15000) != NULL);
    CHECK(s_note("r-1", "webhook", "webhook delivered: HTTP 200", 10000) != NULL);
    /* Nothing delivered twice: m-1 and t-1 were behind the cursor. */
    CHECK_INT(harness_count(s_h, "task.note", "m-1"), 3);

    kill(hooks, SIGTERM);
    CHECK(testenv_wait(s_h->env, hooks, 10000) >= 0);
    harness_destroy(&s_h);
    return check_exit_code("test_hooks");
}
