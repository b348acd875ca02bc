/* A NUL byte inside payload.workspace or payload.branch (issue 38 §8). The services read
 * such a string up to its NUL while the store kept all of it, so the broker accepted
 * "<root>/repo\0/../elsewhere" as a workspace under the roots. A real broker, raw msgpack
 * on its control socket (as any client could send it): each declared payload string with
 * a NUL is refused with its name, and no task is made; the same payload without the NUL
 * is accepted. */
#include "check.h"
#include "msgjson.h"
#include "testbroker.h"
#include "testenv.h"

#include <czmq.h>
#include <msgpack.h>
#include <stdio.h>
#include <string.h>

/* Sends a submit of task `id` to idle-agent whose payload has `key` = `value` (`len`
 * bytes, NULs included); returns the reply's error ("" when accepted; static). */
static const char *s_submit(testenv_t *env, const char *id, const char *key, const char *value,
                            size_t len)
{
    msgpack_sbuffer sbuf;
    msgpack_sbuffer_init(&sbuf);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sbuf, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 5);
    msgpack_pack_str_with_body(&pk, "v", 1);
    msgpack_pack_int(&pk, 1);
    msgpack_pack_str_with_body(&pk, "type", 4);
    msgpack_pack_str_with_body(&pk, "submit", 6);
    msgpack_pack_str_with_body(&pk, "id", 2);
    msgpack_pack_str_with_body(&pk, id, strlen(id));
    msgpack_pack_str_with_body(&pk, "specialist", 10);
    msgpack_pack_str_with_body(&pk, "idle-agent", 10);
    msgpack_pack_str_with_body(&pk, "payload", 7);
    msgpack_pack_map(&pk, 1);
    msgpack_pack_str_with_body(&pk, key, strlen(key));
    msgpack_pack_str_with_body(&pk, value, len);
    zsock_t *req = zsock_new_req(env->control_ep);
    CHECK(req != NULL);
    static char error[1024];
    error[0] = '\0';
    if (req == NULL) {
        msgpack_sbuffer_destroy(&sbuf);
        return "no socket";
    }
    zsock_set_rcvtimeo(req, 5000);
    zframe_t *frame = zframe_new(sbuf.data, sbuf.size);
    msgpack_sbuffer_destroy(&sbuf);
    CHECK(zframe_send(&frame, req, 0) == 0);
    zframe_t *reply = zframe_recv(req);
    CHECK(reply != NULL);
    json_t *answer = reply ? msgjson_from_raw(zframe_data(reply), zframe_size(reply)) : NULL;
    CHECK(answer != NULL);
    const char *text = json_string_value(json_object_get(answer, "error"));
    snprintf(error, sizeof error, "%s", text ? text : "");
    json_decref(answer);
    zframe_destroy(&reply);
    zsock_destroy(&req);
    return error;
}

static void s_check_refused(const char *error, const char *reason)
{
    if (strstr(error, reason) == NULL)
        fprintf(stderr, "reply: '%s'\n(expected: %s)\n", error, reason);
    CHECK(strstr(error, reason) != NULL);
}

int main(void)
{
    testenv_t *env = testenv_new("payload-nul");
    CHECK(env != NULL);
    if (env == NULL)
        return check_exit_code("test_payload_nul");
    char path[600], toml[1400], repo[600];
    snprintf(repo, sizeof repo, "%s/repo", env->dir);
    snprintf(path, sizeof path, "%s/cloister.toml", env->home);
    snprintf(toml, sizeof toml,
             "[security]\nworkspace_roots = [\"%s\"]\n\n[specialists.idle-agent]\nenabled = true\n",
             env->dir);
    CHECK(testenv_write_file(path, toml) == 0);
    pid_t broker = testbroker_start(env, 200, "full");
    CHECK(broker > 0);
    client_t *client = broker > 0 ? testbroker_client(env) : NULL;
    CHECK(client != NULL);
    if (client == NULL) {
        testenv_destroy(&env);
        return check_exit_code("test_payload_nul");
    }

    /* Under the roots up to the NUL, somewhere else after it. */
    char workspace[800];
    int n = snprintf(workspace, sizeof workspace, "%s%c/../../../etc", repo, '\0');
    s_check_refused(s_submit(env, "nul-ws", "workspace", workspace, (size_t)n),
                    "field 'payload.workspace' holds a NUL byte");
    CHECK(testbroker_task_unknown(client, "nul-ws"));
    s_check_refused(s_submit(env, "nul-branch", "branch", "main\0evil", 9),
                    "field 'payload.branch' holds a NUL byte");
    CHECK(testbroker_task_unknown(client, "nul-branch"));
    s_check_refused(s_submit(env, "nul-target", "target", "main\0x", 6),
                    "field 'payload.target' holds a NUL byte");
    CHECK(testbroker_task_unknown(client, "nul-target"));

    /* Without the NUL: accepted, and the broker goes on serving. */
    CHECK_STR(s_submit(env, "ok-ws", "workspace", repo, strlen(repo)), "");
    CHECK_STR(s_submit(env, "ok-branch", "branch", "main", 4), "");
    char state[64];
    CHECK_STR(testbroker_state(client, "ok-branch", state, sizeof state), "queued");

    client_destroy(&client);
    testenv_destroy(&env);
    return check_exit_code("test_payload_nul");
}
