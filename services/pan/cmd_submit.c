/* pan submit: one task, committed through the broker's control socket before pan says so.
 *
 * The payload is built from the flags by the seed's names (prUrl, issueId, workspace,
 * branch, target, description) over whatever --payload JSON gives. A merge-agent task with
 * a workspace and no --group is put in the group `merge:<repository root>:<target>`, so
 * two merges into one target of one repository never run at once, and is pinned to the
 * branch's head (payload.commit) unless the payload names a commit: the broker accepts a
 * merge only of a commit that passed the issue's review.
 *
 * --force sets payload.force = true, which the broker reads as "merge without a passing
 * review of the commit", and records who forced it and when in
 * payload.override (unless the payload brings one, as `pan approve --force` does). */
#include "pan.h"
#include "pan_wait.h"
#include "repository.h"

#include "failure.h"
#include "msgjson.h"
#include "submit.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const s_usage =
    "pan submit <specialist> [--priority urgent|high|normal|low] [--issue ID] [--pr-url URL]\n"
    "       [--workspace DIR] [--branch B] [--target T] [--title TEXT] [--id ID] [--group G]\n"
    "       [--source S] [--max-attempts N] [--timeout SECONDS] [--description TEXT]\n"
    "       [--payload JSON] [--force] [--wait [--wait-timeout SECONDS] [--chain]] [--json]";

typedef struct {
    const char *specialist;
    char specialist_buf[SUBMIT_SPECIALIST_NAME_MAX + 1]; /* its one spelling */
    const char *priority, *issue, *pr_url, *workspace, *branch, *target, *title, *id;
    const char *group, *source, *description, *payload;
    const char *max_attempts, *timeout, *wait_timeout;
    bool json;
    bool force;
    bool wait;
    bool chain;
} submit_args_t;

static int s_parse(int argc, char **argv, submit_args_t *args)
{
    struct {
        const char *name;
        const char **value;
    } options[] = {
        {"--priority", &args->priority},
        {"--issue", &args->issue},
        {"--pr-url", &args->pr_url},
        {"--workspace", &args->workspace},
        {"--branch", &args->branch},
        {"--target", &args->target},
        {"--title", &args->title},
        {"--id", &args->id},
        {"--group", &args->group},
        {"--source", &args->source},
        {"--max-attempts", &args->max_attempts},
        {"--timeout", &args->timeout},
        {"--description", &args->description},
        {"--payload", &args->payload},
        {"--wait-timeout", &args->wait_timeout},
    };
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0 || strcmp(argv[i], "--force") == 0 ||
            strcmp(argv[i], "--wait") == 0 || strcmp(argv[i], "--chain") == 0) {
            *(strcmp(argv[i], "--json") == 0    ? &args->json
              : strcmp(argv[i], "--force") == 0 ? &args->force
              : strcmp(argv[i], "--wait") == 0  ? &args->wait
                                                : &args->chain) = true;
            continue;
        }
        int found = 0;
        for (size_t k = 0; k < sizeof options / sizeof options[0] && found == 0; k++) {
            found = pan_option(argc, argv, &i, options[k].name, options[k].value);
            if (found < 0)
                return pan_usage(s_usage, "%s needs a value", options[k].name);
        }
        if (found)
            continue;
        if (argv[i][0] == '-')
            return pan_usage_unknown(s_usage, argv[i]);
        if (args->specialist != NULL)
            return pan_usage_unknown(s_usage, argv[i]);
        args->specialist = argv[i];
    }
    if (args->specialist == NULL)
        return pan_usage(s_usage, "which specialist? (review-agent, test-agent, merge-agent, ...)");
    args->specialist = submit_specialist_canonical(args->specialist, args->specialist_buf);
    return PAN_EXIT_OK;
}

/* Refuses what would only fail later in a specialist: a workspace that is not a directory
 * here, a branch given for a workspace that is no git repository, or a branch its
 * repository has neither locally nor on a remote (a workspace without --branch need not be
 * a repository: a generic specialist may work on any directory). Writes the commit the
 * branch names into head ("" when there is no branch). Returns 0 or FAILURE_NOT_FOUND with
 * the reason. */
static int s_check_workspace(const char *workspace, const char *branch, char *head, size_t size)
{
    head[0] = '\0';
    struct stat st;
    if (stat(workspace, &st) != 0 || !S_ISDIR(st.st_mode))
        return failure_set(FAILURE_NOT_FOUND, "--workspace %s: no such directory", workspace);
    if (branch == NULL || branch[0] == '\0')
        return 0;
    /* The one rule (repository.h): a branch, local or a remote's; never a tag. */
    if (repository_branch_resolve(workspace, branch, NULL, 0, head, size) != 0) {
        char why[700];
        snprintf(why, sizeof why, "%s", failure_message());
        head[0] = '\0';
        return failure_set(FAILURE_NOT_FOUND, "--branch %s: %s", branch, why);
    }
    return 0;
}

/* True when `specialist` works on a repository it must be given: the review-agent and
 * the test-agent (the merge-agent names its repository by its group or payload). */
static bool s_needs_repository(const char *specialist)
{
    return strcmp(specialist, "review-agent") == 0 || strcmp(specialist, "test-agent") == 0;
}

/* True when --payload (may be NULL) names the workspace itself. */
static bool s_payload_has_workspace(const char *payload_text)
{
    json_t *payload = payload_text ? json_loads(payload_text, 0, NULL) : NULL;
    bool has = json_is_string(json_object_get(payload, "workspace"));
    json_decref(payload);
    return has;
}

/* A review or test without --workspace works on the git repository pan runs in, as gh
 * does: writes its root into workspace. Returns PAN_EXIT_OK, or a usage error when the
 * current directory is in no repository. */
static int s_default_workspace(const char *specialist, char *workspace, size_t size)
{
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd) == NULL || repository_worktree(cwd, workspace, size) != 0) {
        workspace[0] = '\0';
        return pan_usage(s_usage,
                         "a %s task needs a repository: give --workspace DIR, or run pan inside "
                         "the repository",
                         specialist);
    }
    fprintf(stderr, "pan: --workspace %s (the repository here)\n", workspace);
    return PAN_EXIT_OK;
}

/* Says on stderr when no worker of the task's specialist is connected: the task waits in
 * its queue until one comes. A listing that cannot be read says nothing. */
static void s_warn_no_worker(const pan_t *pan, const json_t *task)
{
    if (strcmp(pan_json_str(task, "state", ""), "queued") != 0)
        return;
    const char *specialist = pan_json_str(task, "specialist", "");
    client_t *client = client_new(pan->control_ep, pan->timeout_ms);
    wire_writer_t *writer = wire_writer_new();
    wire_writer_start(writer, MSG_LIST_SPECIALISTS);
    wire_msg_t *reply = NULL;
    int rc = client != NULL ? client_call(client, writer, &reply) : FAILURE_IO;
    wire_writer_destroy(&writer);
    client_destroy(&client);
    const msgpack_object *data = rc == 0 ? wire_msg_object(reply, FIELD_DATA) : NULL;
    json_t *specialists = data ? msgjson_from_object(data) : NULL;
    wire_msg_destroy(&reply);
    /* A specialist the broker does not list has no worker either. */
    int64_t workers = json_is_array(specialists) ? 0 : -1;
    size_t i;
    const json_t *entry;
    json_array_foreach(specialists, i, entry)
    {
        if (strcmp(pan_json_str(entry, "name", ""), specialist) == 0)
            workers = pan_json_int(entry, "workers", 0);
    }
    json_decref(specialists);
    if (workers == 0)
        fprintf(stderr, "pan: queued; no %s worker is connected (it waits until one comes)\n",
                specialist);
}

/* payload.force = true, and payload.override unless the payload has one. Returns 0, or -1
 * when memory runs out. */
static int s_mark_forced(json_t *payload)
{
    if (json_object_get(payload, "override") == NULL &&
        json_object_set_new(payload, "override",
                            pan_override_new("forced at submit (pan submit --force)", NULL)) != 0)
        return -1;
    return json_object_set_new(payload, "force", json_true());
}

/* Builds the payload: --payload JSON first, then the flags over it. Returns a new
 * object (caller owns) or NULL after printing why. */
static json_t *s_payload(const submit_args_t *args, const char *workspace)
{
    json_t *payload = NULL;
    if (args->payload != NULL) {
        json_error_t error;
        payload = json_loads(args->payload, JSON_DECODE_ANY, &error);
        if (payload == NULL || !json_is_object(payload)) {
            pan_usage(s_usage, "--payload must be a JSON object%s%s", payload ? "" : ": ",
                      payload ? "" : error.text);
            json_decref(payload);
            return NULL;
        }
    } else {
        payload = json_object();
    }
    struct {
        const char *key;
        const char *value;
        const char *option;
    } fields[] = {
        {"prUrl", args->pr_url, "--pr-url"},
        {"issueId", args->issue, "--issue"},
        {"workspace", workspace, "--workspace"},
        {"branch", args->branch, "--branch"},
        {"target", args->target, "--target"},
        {"description", args->description, "--description"},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (fields[i].value == NULL)
            continue;
        /* json_string() refuses bytes that are not UTF-8: say so rather than drop the
         * field from the payload. */
        json_t *value = json_string(fields[i].value);
        if (value == NULL || json_object_set_new(payload, fields[i].key, value) != 0) {
            pan_usage(s_usage, "%s must be UTF-8 text", fields[i].option);
            json_decref(payload);
            return NULL;
        }
    }
    if (args->force && s_mark_forced(payload) != 0) {
        pan_fail(PAN_EXIT_ERROR, "out of memory");
        json_decref(payload);
        return NULL;
    }
    return payload;
}

int cmd_submit(const pan_t *pan, int argc, char **argv)
{
    submit_args_t args = {0};
    int code = s_parse(argc, argv, &args);
    if (code != PAN_EXIT_OK)
        return code;
    int64_t max_attempts = 0, timeout_s = 0;
    if (args.max_attempts && !pan_parse_int(args.max_attempts, 1, SUBMIT_MAX_ATTEMPTS, &max_attempts))
        return pan_usage(s_usage, "--max-attempts must be 1..%d, not '%s'", SUBMIT_MAX_ATTEMPTS,
                         args.max_attempts);
    if (args.timeout && !pan_parse_int(args.timeout, 1, SUBMIT_MAX_TIMEOUT_S, &timeout_s))
        return pan_usage(s_usage, "--timeout must be a number of seconds, not '%s'", args.timeout);
    if (args.chain && !args.wait)
        return pan_usage(s_usage, "--chain follows a task while waiting for it: add --wait");
    int64_t wait_timeout_s = 0;
    if (args.wait_timeout && !pan_parse_int(args.wait_timeout, 1, 7 * 24 * 3600, &wait_timeout_s))
        return pan_usage(s_usage, "--wait-timeout must be a number of seconds, not '%s'",
                         args.wait_timeout);

    char workspace[PATH_MAX] = "";
    if (args.workspace != NULL && pan_absolute_path(args.workspace, workspace, sizeof workspace) != 0)
        return pan_fail(PAN_EXIT_ERROR, "--workspace: %s", failure_message());
    if (args.workspace == NULL && s_needs_repository(args.specialist) &&
        !s_payload_has_workspace(args.payload)) {
        code = s_default_workspace(args.specialist, workspace, sizeof workspace);
        if (code != PAN_EXIT_OK)
            return code;
    }
    char head[64] = "";
    if (workspace[0] != '\0' && s_check_workspace(workspace, args.branch, head, sizeof head) != 0)
        return pan_usage(s_usage, "%s", failure_message());
    char group[PATH_MAX + 256] = "";
    if (args.group != NULL) {
        snprintf(group, sizeof group, "%s", args.group);
    } else if (strcmp(args.specialist, "merge-agent") == 0 && workspace[0] != '\0' &&
               !config_bool(pan->config, "merge", "queue", true)) {
        /* Without the merge queue ([merge] queue = false) merges into one target take turns
         * through their group; with it, the merge-agents order them themselves and test
         * them in parallel. Not inside a repository here: the workspace names the group. */
        repository_merge_group(workspace, args.target ? args.target : "main", group, sizeof group);
    }
    char id[CLIENT_ID_SIZE];
    if (args.id == NULL)
        client_new_id(id, sizeof id);

    json_t *payload = s_payload(&args, workspace[0] ? workspace : NULL);
    if (payload == NULL)
        return PAN_EXIT_USAGE;
    /* A merge names the commit it merges, the branch's head now: the broker merges only a
     * commit that passed review, and the merge-agent stops if the branch moves meanwhile. */
    if (strcmp(args.specialist, "merge-agent") == 0 && head[0] != '\0' &&
        json_object_get(payload, "commit") == NULL &&
        json_object_set_new(payload, "commit", json_string(head)) != 0) {
        json_decref(payload);
        return pan_fail(PAN_EXIT_ERROR, "out of memory");
    }
    wire_writer_t *payload_writer = wire_writer_new();
    int rc = msgjson_to_map(payload_writer, payload);
    json_decref(payload);
    if (rc != 0) {
        wire_writer_destroy(&payload_writer);
        return pan_usage(s_usage, "--payload is %s", failure_message());
    }
    submit_t submit = {.id = args.id ? args.id : id,
                       .specialist = args.specialist,
                       .priority = args.priority,
                       .source = args.source ? args.source : "pan",
                       .title = args.title,
                       .issue = args.issue,
                       .group = group[0] ? group : NULL,
                       .max_attempts = max_attempts,
                       .timeout_s = timeout_s};
    submit.payload = wire_writer_data(payload_writer, &submit.payload_len);
    if (submit_check(&submit) != 0) {
        wire_writer_destroy(&payload_writer);
        return pan_usage(s_usage, "%s", failure_message());
    }
    wire_writer_t *writer = wire_writer_new();
    submit_encode(writer, &submit);
    wire_writer_destroy(&payload_writer);

    /* Watching starts before the submit, so an end that comes at once is not missed. */
    pan_watch_t *watch = args.wait ? pan_watch_start(pan, &code) : NULL;
    if (args.wait && watch == NULL) {
        wire_writer_destroy(&writer);
        return code;
    }
    json_t *task = NULL;
    code = pan_call(pan, writer, &task);
    wire_writer_destroy(&writer);
    if (code == PAN_EXIT_ERROR && strstr(failure_message(), "unknown specialist") != NULL)
        pan_suggest_specialist(pan, submit.specialist);
    if (code != PAN_EXIT_OK) {
        if (watch != NULL)
            pan_watch_wait(&watch, NULL, 0, &(pan_wait_options_t){0});
        return code;
    }
    const char *task_id = pan_json_str(task, "id", args.id ? args.id : id);
    s_warn_no_worker(pan, task);
    if (watch != NULL) {
        fprintf(stderr, "pan: submitted %s, waiting for it to end\n", task_id);
        pan_wait_options_t options = {
            .timeout_s = (int)wait_timeout_s, .json = args.json, .chain = args.chain};
        code = pan_watch_wait(&watch, &task_id, 1, &options);
    } else if (args.json) {
        code = pan_print_json(task);
    } else {
        puts(task_id);
    }
    json_decref(task);
    return code;
}
