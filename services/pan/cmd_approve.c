/* pan approve: the seed's "Approve & Merge". Queues the merge of a reviewed issue.
 *
 *   pan approve <issue-or-task> [--force [--reason TEXT]] [--priority P] [--json]
 *               [--wait [--wait-timeout S] [--chain]]
 *               [--workspace DIR --branch B [--target T]]
 *
 * With --wait it waits for the merge and exits with its verdict (common/bus/verdict.h); a
 * refused blocked gate exits 6 (gate_blocked).
 *
 * `disabled` means disabled: when the review mode that holds for the target branch (its
 * .cloister/config.toml, else [review] mode; repository.h) is "disabled", the merge of the
 * branch's head is queued without a review -- of the review's workspace and branch when
 * the issue has one, else of --workspace and --branch.
 *
 * The argument is an issue id: only reviews OF that issue count, matched exactly as the
 * broker stores it (no case-folding, no task id, no prefix): the stored
 * `task.done/review-agent` events are replayed and the last one whose issue is the
 * argument wins; when that replay cannot be completed nothing is approved (an older
 * approval must never stand in for a newer verdict). With --task the argument is a review
 * task's id instead, or the unique start of one (an ambiguous start is refused). The
 * review task must be `done` and its gate open (its result's GATE, which
 * follows the review mode's rules; a blocked gate is refused with its blocking findings by
 * file:line). --force overrides a blocked gate, and the override is recorded in the merge's
 * payload.override {by, at, reason (--reason, else a default), review} (payload.force
 * tells the broker, which holds the same gate at submit). Its payload gives workspace,
 * branch, target (default main) and issueId.
 *
 * The merge is submitted through `pan submit` (cmd_submit), so it gets the same payload
 * (and, with [merge] queue = false, the serialisation group merge:<repository
 * root>:<target>; with the queue, none): id `merge-<review task
 * id>` (a second approve of the same review changes nothing), specialist merge-agent,
 * priority high. Prints a line saying what is merged, then the merge task's id (or, with
 * --json, the task). */
#include "pan.h"

#include "failure.h"
#include "msgjson.h"
#include "repository.h"
#include "verdict.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const s_usage =
    "pan approve <issue> | --task <review-task-id> [--force [--reason TEXT]] [--json]\n"
    "       [--priority urgent|high|normal|low]\n"
    "       [--wait [--wait-timeout SECONDS] [--chain]] [--workspace DIR --branch B [--target T]]";

/* Asks the broker for task `id`. Returns 0 with *task (caller owns), FAILURE_NOT_FOUND
 * when the broker does not know it, or another FAILURE_* with the reason. */
static int s_show_task(client_t *client, const char *id, json_t **task)
{
    *task = NULL;
    wire_writer_t *writer = wire_writer_new();
    wire_writer_start(writer, MSG_SHOW_TASK);
    wire_put_str(writer, FIELD_ID, id);
    wire_msg_t *reply = NULL;
    int rc = client_call(client, writer, &reply);
    wire_writer_destroy(&writer);
    if (rc != 0)
        return rc;
    const msgpack_object *data = wire_msg_object(reply, FIELD_DATA);
    *task = data ? msgjson_from_object(data) : NULL;
    wire_msg_destroy(&reply);
    if (!json_is_object(*task)) {
        json_decref(*task);
        *task = NULL;
        return failure_set(FAILURE_INVALID, "the broker's answer about task %s has no task", id);
    }
    return 0;
}

/* The newest review: replayed task.done/review-agent events, the last with the issue. */
typedef struct {
    const char *issue;
    char task_id[256];
} newest_review_t;

static int s_on_review_done(const wire_msg_t *event, const void *raw, size_t len, void *arg)
{
    (void)raw;
    (void)len;
    newest_review_t *newest = arg;
    const char *issue = wire_msg_str(event, FIELD_ISSUE, "");
    const char *task = wire_msg_str(event, FIELD_TASK, "");
    if (task[0] != '\0' && strcmp(issue, newest->issue) == 0)
        snprintf(newest->task_id, sizeof newest->task_id, "%s", task);
    return 0;
}

/* Finds the id of the newest finished review of `issue` into newest->task_id ("" when
 * there is none). Returns 0 or the replay's FAILURE_*. */
static int s_find_review_of_issue(client_t *client, newest_review_t *newest)
{
    client_events_t *events = client_events_new(NULL, "task.done/review-agent");
    if (events == NULL)
        return FAILURE_MEMORY;
    int rc = client_events_run(events, client, 0, false, NULL, s_on_review_done, newest);
    client_events_destroy(&events);
    return rc;
}

/* The exit code for a failed broker request (the reason is in failure_message()). */
static int s_request_failed(int rc)
{
    return pan_fail(rc == FAILURE_TIMEOUT || rc == FAILURE_IO ? PAN_EXIT_UNREACHABLE
                                                              : PAN_EXIT_ERROR,
                    "%s", failure_message());
}

/* Looks up the review task `what` names: with `by_task` a task id or the unique start of
 * one, else an issue, matched exactly. Returns PAN_EXIT_OK with *review (caller owns), or
 * an exit code after printing why. */
static int s_find_review(const pan_t *pan, const char *what, bool by_task, json_t **review)
{
    *review = NULL;
    char id[256];
    if (by_task) {
        int code = pan_task_id_resolve(pan, what, id, sizeof id);
        if (code != PAN_EXIT_OK)
            return code;
    }
    client_t *client = client_new(pan->control_ep, pan->timeout_ms);
    if (client == NULL)
        return pan_fail(PAN_EXIT_ERROR, "%s", failure_message());
    int code = PAN_EXIT_OK;
    int rc = 0;
    if (by_task) {
        rc = s_show_task(client, id, review);
    } else {
        newest_review_t newest = {.issue = what};
        rc = s_find_review_of_issue(client, &newest);
        if (rc != 0) {
            /* Without every stored review, an older approval could be taken for the
             * newest verdict: nothing is approved. */
            code = pan_fail(rc == FAILURE_TIMEOUT || rc == FAILURE_IO ? PAN_EXIT_UNREACHABLE
                                                                      : PAN_EXIT_ERROR,
                            "cannot tell which review of '%s' is the newest, the replay of "
                            "finished reviews did not complete (%s): not approving",
                            what, failure_message());
        } else if (newest.task_id[0] == '\0') {
            code = pan_fail(PAN_EXIT_ERROR,
                            "no finished review found for issue '%s' (an issue matches exactly "
                            "as stored; to approve a review by its task id: pan approve --task "
                            "ID)",
                            what);
        } else {
            rc = s_show_task(client, newest.task_id, review);
        }
    }
    if (code == PAN_EXIT_OK && rc != 0)
        code = s_request_failed(rc);
    client_destroy(&client);
    return code;
}

/* True when a finding of the review blocks its gate: as the review marked it, or (a
 * review from before findings were marked) when it is an error. */
static bool s_finding_blocks(const json_t *finding)
{
    const json_t *blocking = json_object_get(finding, "blocking");
    if (json_is_boolean(blocking))
        return json_is_true(blocking);
    return strcmp(pan_json_str(finding, "severity", ""), "error") == 0;
}

/* Prints why the review's gate is blocked: its mode and verdict, and each blocking finding
 * by file:line. */
static void s_print_blocked(const json_t *review)
{
    const json_t *result = json_object_get(review, "result");
    const char *mode = pan_json_str(result, "review_mode", "");
    fprintf(stderr, "pan: review %s blocked the merge gate (%s%s%sREVIEW_RESULT: %s):\n",
            pan_json_str(review, "id", "?"), mode[0] ? "mode " : "", mode, mode[0] ? ", " : "",
            pan_json_str(result, "REVIEW_RESULT", "none"));
    size_t i;
    const json_t *finding;
    int named = 0;
    json_array_foreach(json_object_get(result, "FINDINGS"), i, finding)
    {
        if (!s_finding_blocks(finding))
            continue;
        const char *file = pan_json_str(finding, "file", "");
        int64_t line = pan_json_int(finding, "line", 0);
        fprintf(stderr, "  %s ", pan_json_str(finding, "severity", "?"));
        if (file[0] != '\0' && line > 0)
            fprintf(stderr, "%s:%lld ", file, (long long)line);
        else if (file[0] != '\0')
            fprintf(stderr, "%s ", file);
        fprintf(stderr, "%s\n", pan_json_str(finding, "message", ""));
        named++;
    }
    if (named == 0)
        fprintf(stderr, "  (no blocking finding: the verdict itself blocks)\n");
    fprintf(stderr, "pan: not merging (--force merges anyway, and records the override)\n");
}

/* True when the review's gate is open. A review from before GATE existed is open when its
 * verdict is APPROVED. */
static bool s_gate_open(const json_t *review)
{
    const json_t *result = json_object_get(review, "result");
    const char *gate = pan_json_str(result, "GATE", NULL);
    if (gate != NULL)
        return strcmp(gate, "open") == 0;
    return strcasecmp(pan_json_str(result, "REVIEW_RESULT", ""), "APPROVED") == 0;
}

/* Checks that `review` is a finished review with what a merge needs, whose gate is open
 * (or *overridden is set: --force over a blocked gate). Returns PAN_EXIT_OK, or after
 * printing why VERDICT_EXIT_GATE_BLOCKED (a blocked gate) or PAN_EXIT_ERROR. */
static int s_check_review(const json_t *review, bool force, bool *overridden)
{
    *overridden = false;
    const char *id = pan_json_str(review, "id", "?");
    const char *specialist = pan_json_str(review, "specialist", "");
    const char *state = pan_json_str(review, "state", "?");
    if (strcmp(specialist, "review-agent") != 0)
        return pan_fail(PAN_EXIT_ERROR, "task %s is a %s task, not a review-agent review", id,
                        specialist[0] ? specialist : "?");
    if (strcmp(state, "done") != 0)
        return pan_fail(PAN_EXIT_ERROR, "review %s is %s, not finished: nothing to approve", id,
                        state);
    const json_t *payload = json_object_get(review, "payload");
    if (pan_json_str(payload, "workspace", "")[0] == '\0' ||
        pan_json_str(payload, "branch", "")[0] == '\0')
        return pan_fail(PAN_EXIT_ERROR,
                        "review %s has no workspace and branch in its payload: nothing to merge",
                        id);
    /* A review made while the mode was disabled approved without reading anything; the
     * caller merges unreviewed only while the mode is disabled, so here it is not, and the
     * broker's gate counts no such review: say so before asking it. */
    bool unread = strcmp(pan_json_str(json_object_get(review, "result"), "review_mode", ""),
                         "disabled") == 0;
    if (unread && !force) {
        fprintf(stderr,
                "pan: review %s ran while the review mode was disabled, and approves nothing now "
                "that it is not; review the branch first (pan submit review-agent --issue %s "
                "--workspace %s --branch %s), or --force\n",
                id, pan_json_str(review, "issue", "?"), pan_json_str(payload, "workspace", "?"),
                pan_json_str(payload, "branch", "?"));
        return VERDICT_EXIT_GATE_BLOCKED;
    }
    if (unread || !s_gate_open(review)) {
        if (!force) {
            s_print_blocked(review);
            return VERDICT_EXIT_GATE_BLOCKED;
        }
        *overridden = true;
    }
    return PAN_EXIT_OK;
}

/* The merge's payload beyond the flags: the reviewed commit it is pinned to, and the
 * override record when --force overrode a blocked gate. Returns its JSON text (caller
 * frees) or NULL when memory runs out. */
static char *s_merge_payload(const json_t *review, bool overridden, const char *reason)
{
    json_t *payload = json_object();
    /* The merge is pinned to the commit the review read: a branch that moved since is not
     * merged unreviewed (the merge-agent refuses it). */
    const json_t *result = json_object_get(review, "result");
    const char *reviewed = pan_json_str(result, "diff_head", "");
    if (reviewed[0] == '\0') /* a review-agent of one's own, through cloister-worker */
        reviewed = pan_json_str(result, "REVIEWED_COMMIT", "");
    if (payload != NULL && reviewed[0] != '\0')
        json_object_set_new(payload, "commit", json_string(reviewed));
    /* ... and carries the merge base the review read: the broker checks it is the review's,
     * and the merge-agent holds the merge when the target no longer contains it. */
    const char *base = pan_json_str(result, "merge_base", "");
    if (base[0] == '\0')
        base = pan_json_str(result, "MERGE_BASE", "");
    if (payload != NULL && base[0] != '\0')
        json_object_set_new(payload, "merge_base", json_string(base));
    if (payload != NULL && overridden)
        json_object_set_new(payload, "override",
                            pan_override_new(reason ? reason
                                                    : "review gate blocked (pan approve --force)",
                                             pan_json_str(review, "id", "")));
    char *text = payload ? json_dumps(payload, JSON_COMPACT) : NULL;
    json_decref(payload);
    return text;
}

/* What `pan approve` was asked. */
typedef struct {
    const char *what, *priority, *workspace, *branch, *target, *wait_timeout, *reason;
    bool force, json, wait, chain, by_task;
} approve_args_t;

/* Parses the arguments into *args. Returns PAN_EXIT_OK or the usage exit code. */
static int s_parse(int argc, char **argv, approve_args_t *args)
{
    *args = (approve_args_t){.priority = "high"};
    for (int i = 0; i < argc; i++) {
        struct {
            const char *name;
            const char **value;
        } options[] = {{"--priority", &args->priority}, {"--workspace", &args->workspace},
                       {"--branch", &args->branch},     {"--target", &args->target},
                       {"--wait-timeout", &args->wait_timeout}, {"--reason", &args->reason}};
        int found = 0;
        for (size_t k = 0; k < sizeof options / sizeof options[0] && found == 0; k++) {
            found = pan_option(argc, argv, &i, options[k].name, options[k].value);
            if (found < 0)
                return pan_usage(s_usage, "%s needs a value", options[k].name);
        }
        if (found)
            continue;
        bool *flag = strcmp(argv[i], "--force") == 0  ? &args->force
                     : strcmp(argv[i], "--json") == 0 ? &args->json
                     : strcmp(argv[i], "--wait") == 0 ? &args->wait
                     : strcmp(argv[i], "--chain") == 0 ? &args->chain
                     : strcmp(argv[i], "--task") == 0  ? &args->by_task
                                                       : NULL;
        if (flag != NULL)
            *flag = true;
        else if (argv[i][0] == '-')
            return pan_usage_unknown(s_usage, argv[i]);
        else if (args->what != NULL)
            return pan_usage_unknown(s_usage, argv[i]);
        else
            args->what = argv[i];
    }
    if (args->what == NULL)
        return pan_usage(s_usage, "approve which issue or review task?");
    if (priority_parse(args->priority) < 0)
        return pan_usage(s_usage, "invalid priority '%s' (urgent, high, normal, low)",
                         args->priority);
    if ((args->workspace == NULL) != (args->branch == NULL))
        return pan_usage(s_usage, "--workspace and --branch go together");
    if (args->reason != NULL && (!args->force || args->reason[0] == '\0'))
        return pan_usage(s_usage, "--reason goes with --force, and says why");
    if ((args->chain || args->wait_timeout) && !args->wait)
        return pan_usage(s_usage, "--chain and --wait-timeout go with --wait");
    return PAN_EXIT_OK;
}

/* The merge to submit: what it merges and how. */
typedef struct {
    const char *workspace, *branch, *target, *issue;
    const char *id;      /* the merge task's id */
    const char *payload; /* extra payload JSON, or NULL */
    bool force;
} approve_merge_t;

/* Submits the merge through `pan submit` (so it gets the same payload and group), passing
 * --json and --wait on. Returns its exit code. */
static int s_submit_merge(const pan_t *pan, const approve_args_t *args, const approve_merge_t *m)
{
    char *title = NULL;
    if (asprintf(&title, "Merge %s into %s", m->branch, m->target) < 0)
        return pan_fail(PAN_EXIT_ERROR, "out of memory");
    char *submit_argv[32];
    int n = 0;
    const char *options[][2] = {
        {"--workspace", m->workspace}, {"--branch", m->branch},        {"--target", m->target},
        {"--issue", m->issue},         {"--id", m->id},                {"--priority", args->priority},
        {"--title", title},            {"--source", "pan approve"},    {"--payload", m->payload},
        {"--wait-timeout", args->wait_timeout},
    };
    submit_argv[n++] = "merge-agent";
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
        if (options[i][1] == NULL || options[i][1][0] == '\0')
            continue;
        submit_argv[n++] = (char *)options[i][0];
        submit_argv[n++] = (char *)options[i][1];
    }
    const char *flags[][2] = {{"--force", m->force ? "" : NULL},
                              {"--json", args->json ? "" : NULL},
                              {"--wait", args->wait ? "" : NULL},
                              {"--chain", args->chain ? "" : NULL}};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (flags[i][1] != NULL)
            submit_argv[n++] = (char *)flags[i][0];
    submit_argv[n] = NULL;
    int code = cmd_submit(pan, n, submit_argv);
    free(title);
    return code;
}

/* Review mode "disabled" for the target: the merge of the branch's head, no review asked.
 * Returns the exit code. */
static int s_merge_unreviewed(const pan_t *pan, const approve_args_t *args,
                              const approve_merge_t *merge)
{
    char head[64], id[300];
    if (repository_branch_commit(merge->workspace, merge->branch, head, sizeof head) != 1)
        return pan_fail(PAN_EXIT_ERROR, "%s has no branch '%s' to merge", merge->workspace,
                        merge->branch);
    snprintf(id, sizeof id, "merge-%.200s-%.12s", merge->issue, head);
    approve_merge_t unreviewed = *merge;
    unreviewed.id = merge->id ? merge->id : id;
    unreviewed.payload = NULL; /* pan submit pins the branch's head */
    if (!args->json)
        printf("Review mode is disabled for '%s' of %s: merging the head of '%s' (%.12s) "
               "without a review\n",
               merge->target, merge->workspace, merge->branch, head);
    int code = s_submit_merge(pan, args, &unreviewed);
    if (code == PAN_EXIT_ERROR)
        fprintf(stderr,
                "pan: the broker opens no repository: it lets a merge without a review through "
                "once a review-agent has reported the mode \"disabled\" of '%s' for issue %s "
                "(the review ends at once in that mode): pan submit review-agent --workspace %s "
                "--branch %s --target %s --issue %s --wait, then approve again\n",
                merge->target, merge->issue, merge->workspace, merge->branch, merge->target,
                merge->issue);
    return code;
}

/* True when the review mode that holds for `target` of `workspace` is "disabled". */
static bool s_review_disabled(const pan_t *pan, const char *workspace, const char *target)
{
    char mode[16];
    if (repository_review_mode(pan->config, workspace, target, mode, sizeof mode) != 0)
        fprintf(stderr, "pan: %s; the review gate holds\n", failure_message());
    return strcmp(mode, "disabled") == 0;
}

int cmd_approve(const pan_t *pan, int argc, char **argv)
{
    approve_args_t args;
    int code = s_parse(argc, argv, &args);
    if (code != PAN_EXIT_OK)
        return code;
    const char *target = args.target ? args.target : "main";
    if (args.workspace != NULL && !args.by_task && s_review_disabled(pan, args.workspace, target)) {
        approve_merge_t merge = {.workspace = args.workspace, .branch = args.branch,
                                 .target = target, .issue = args.what};
        return s_merge_unreviewed(pan, &args, &merge);
    }
    json_t *review = NULL;
    code = s_find_review(pan, args.what, args.by_task, &review);
    if (code != PAN_EXIT_OK) {
        json_decref(review);
        return code;
    }
    const json_t *payload = json_object_get(review, "payload");
    const char *review_id = pan_json_str(review, "id", "");
    approve_merge_t merge = {
        .workspace = pan_json_str(payload, "workspace", ""),
        .branch = pan_json_str(payload, "branch", ""),
        .target = pan_json_str(payload, "target", "main"),
        .issue = pan_json_str(payload, "issueId", pan_json_str(review, "issue", "")),
    };
    if (merge.workspace[0] != '\0' && merge.branch[0] != '\0' &&
        s_review_disabled(pan, merge.workspace, merge.target)) {
        code = s_merge_unreviewed(pan, &args, &merge);
        json_decref(review);
        return code;
    }
    bool overridden = false;
    code = s_check_review(review, args.force, &overridden);
    char *merge_id = NULL, *extra = NULL;
    if (code == PAN_EXIT_OK) {
        extra = s_merge_payload(review, overridden, args.reason);
        if (extra == NULL || asprintf(&merge_id, "merge-%s", review_id) < 0)
            code = pan_fail(PAN_EXIT_ERROR, "out of memory");
    }
    if (code == PAN_EXIT_OK) {
        if (!args.json)
            printf("Approving review %s%s: merging '%s' into '%s' of %s\n", review_id,
                   overridden ? " (its blocked gate overridden by --force)" : "", merge.branch,
                   merge.target, merge.workspace);
        merge.id = merge_id;
        merge.payload = extra;
        merge.force = overridden;
        code = s_submit_merge(pan, &args, &merge);
    }
    free(merge_id);
    free(extra);
    json_decref(review);
    return code;
}
