/* test_reload: cloister.toml changed while the broker runs. A SIGHUP (or `pan reload`)
 * applies what can change live -- here a workspace root added: a repository refused before
 * is accepted after, with no restart -- and says what waits for a restart ([broker] sync);
 * a file that does not parse changes nothing and says where it is wrong; a submitter key
 * may not reload. */
#include "msgjson.h"
#include "pan_harness.h"

static char s_out[PAN_OUT_SIZE];

static void s_write_config(testenv_t *env, const char *text)
{
    char path[600];
    snprintf(path, sizeof path, "%s/cloister.toml", env->home);
    CHECK(testenv_write_file(path, text) == 0);
}

/* Submits a test-agent task for `workspace` through pan; its exit code. */
static int s_submit(testenv_t *env, const char *id, const char *workspace)
{
    return harness_pan_all(env, s_out, "submit", "test-agent", "--id", id, "--workspace", workspace,
                           NULL);
}

int main(void)
{
    testenv_t *env = testenv_new("reload");
    CHECK(env != NULL);
    /* The roots come from cloister.toml here, not from the test environment's variable. */
    unsetenv("CLOISTER_WORKSPACE_ROOTS");
    char a[600], b[600], config[2048];
    snprintf(a, sizeof a, "%s/repos-a", env->dir);
    snprintf(b, sizeof b, "%s/repos-b", env->dir);
    CHECK(testenv_write_file(strcat(strcpy(config, a), "/README"), "a\n") == 0);
    CHECK(testenv_write_file(strcat(strcpy(config, b), "/README"), "b\n") == 0);
    snprintf(config, sizeof config, "[security]\nworkspace_roots = [\"%s\"]\n", a);
    s_write_config(env, config);
    pid_t broker = harness_start_broker(env);
    CHECK(broker > 0);
    CHECK(s_submit(env, "in-b-before", b) != 0);
    if (strstr(s_out, "workspace") == NULL)
        fprintf(stderr, "pan said: %s\n", s_out);
    CHECK(strstr(s_out, "workspace") != NULL); /* refused: not under the roots */

    /* A root added, applied by SIGHUP. */
    snprintf(config, sizeof config, "[security]\nworkspace_roots = [\"%s\", \"%s\"]\n", a, b);
    s_write_config(env, config);
    testenv_signal(broker, SIGHUP);
    bool accepted = false;
    for (int i = 0; i < 50 && !accepted; i++) {
        accepted = s_submit(env, "in-b-after", b) == 0;
        if (!accepted)
            testenv_sleep_ms(100);
    }
    CHECK(accepted);

    /* pan reload says what it applied and what waits for a restart. */
    snprintf(config, sizeof config,
             "[broker]\nsync = \"off\"\nretry_backoff_ms = 75\n\n"
             "[security]\nworkspace_roots = [\"%s\"]\n",
             a);
    s_write_config(env, config);
    CHECK_INT(harness_pan(env, s_out, "reload", NULL), 0);
    CHECK(strstr(s_out, "[security] workspace_roots") != NULL);
    CHECK(strstr(s_out, "[broker] retry_backoff_ms") != NULL);
    CHECK(strstr(s_out, "needs a restart:      [broker] sync") != NULL);
    CHECK(s_submit(env, "in-b-removed", b) != 0);

    /* A file that does not parse changes nothing (the broker says where it is wrong; pan,
     * which reads the same file, refuses it too, so the submit goes without pan). */
    s_write_config(env, "[security\nworkspace_roots = 1\n");
    testenv_signal(broker, SIGHUP);
    char log_path[600];
    snprintf(log_path, sizeof log_path, "%s/broker.log", env->dir);
    bool said = false;
    for (int i = 0; i < 50 && !said; i++) {
        char *log = testenv_read_file(log_path);
        said = log != NULL && strstr(log, "not reloaded, nothing changed") != NULL &&
               strstr(log, "cloister.toml:1:") != NULL;
        free(log);
        if (!said)
            testenv_sleep_ms(100);
    }
    CHECK(said);
    CHECK(harness_pan_all(env, s_out, "reload", NULL) != 0);
    CHECK(strstr(s_out, "cloister.toml:1:") != NULL);
    client_t *client = testbroker_client(env);
    wire_writer_t *payload = wire_writer_new();
    json_t *json = json_pack("{s:s}", "workspace", a);
    CHECK(json != NULL && msgjson_to_map(payload, json) == 0);
    json_decref(json);
    submit_t task = {.id = "in-a-still", .specialist = "test-agent", .title = "in a"};
    task.payload = wire_writer_data(payload, &task.payload_len);
    wire_msg_t *reply = NULL;
    CHECK_INT(client_submit(client, &task, NULL, 0, &reply), 0);
    wire_msg_destroy(&reply);
    wire_writer_destroy(&payload);
    client_destroy(&client);
    testenv_destroy(&env);
    return check_exit_code("test_reload");
}
