/* pan prompt: the prompt a task would get, without running anything (see cmd_prompt.h).
 * CLOISTER_PROMPTS_DIR (the source tree's prompts/) comes from services/pan/CMakeLists.txt. */
#include "cmd_prompt.h"

#include "failure.h"
#include "prompt.h"
#include "reviewer_prompt.h"
#include "template.h"
#include "testdetect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const s_usage =
    "pan prompt <specialist> <task-id> [--prompts-dir DIR] [--reviewer NAME]";

/* The test command the specialist would use for `workspace`, into buf. */
static void s_test_command(char *buf, size_t size, char *reason, size_t reason_size,
                           const config_t *config, const char *specialist, const char *workspace)
{
    testdetect_t found;
    const char *configured = config_specialist_test_command(config, specialist);
    if (workspace[0] != '\0' && testdetect_find(&found, workspace, configured) == 0) {
        snprintf(buf, size, "%s", found.command);
        snprintf(reason, reason_size, "%s", found.reason);
    } else if (configured != NULL && configured[0] != '\0') {
        snprintf(buf, size, "%s", configured);
        snprintf(reason, reason_size, "configured");
    } else {
        snprintf(buf, size, "(none detected)");
        snprintf(reason, reason_size, "nothing detected");
    }
}

/* The checks [review] would run, as the review prompt's {{checks}} note. */
static char *s_review_checks(const config_t *config)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        return NULL;
    size_t n = config_array_len(config, "review", "checks");
    fputs(n ? "(run when the review runs:" : "(no checks configured)", f);
    for (size_t i = 0; i < n; i++) {
        const char *command = config_array_string(config, "review", "checks", i);
        fprintf(f, "%s `%s`", i ? "," : "", command ? command : "?");
    }
    fputs(n ? ")\n" : "\n", f);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* The specialist-specific placeholders that can be known without running the job. */
static int s_specialist_vars(template_vars_t *vars, const config_t *config, const char *specialist,
                             const json_t *payload)
{
    const char *workspace = pan_json_str(payload, "workspace", "");
    const char *target = pan_json_str(payload, "target", "");
    char command[4096], reason[512];
    s_test_command(command, sizeof command, reason, sizeof reason, config, specialist, workspace);
    int rc = 0;
    if (strcmp(specialist, "merge-agent") == 0) {
        const char *values[][2] = {
            {"project", workspace[0] ? workspace : "(not given)"},
            {"source_branch", pan_json_str(payload, "branch", "(not given)")},
            {"target_branch", target[0] ? target : "main"},
            {"conflict_files", "(computed when the merge runs)"},
            {"test_command", command},
            {"worktree", "(a worktree created when the merge runs)"},
        };
        for (size_t i = 0; i < sizeof values / sizeof values[0] && rc == 0; i++)
            rc = template_vars_set(vars, values[i][0], values[i][1]);
    } else if (strcmp(specialist, "review-agent") == 0) {
        char *checks = s_review_checks(config);
        rc = checks == NULL ? failure_set(FAILURE_MEMORY, "out of memory") : 0;
        if (rc == 0 &&
            ((rc = template_vars_set(vars, "diff", "(computed when the review runs)")) != 0 ||
             (rc = template_vars_set(vars, "scope", "(computed when the review runs)")) != 0 ||
             (rc = template_vars_set(vars, "question", "(none: this is your first look)")) !=
                 0 ||
             (rc = template_vars_set(vars, "checks", checks)) != 0 ||
             (rc = template_vars_set(vars, "review_mode",
                                     config_string(config, "review", "mode", "normal"))) != 0))
            rc = failure_set(rc, "cannot set the prompt variables");
        free(checks);
    } else if (strcmp(specialist, "test-agent") == 0) {
        if ((rc = template_vars_set(vars, "test_command", command)) != 0 ||
            (rc = template_vars_set(vars, "test_detection", reason)) != 0 ||
            (rc = template_vars_set(vars, "test_results", "(produced when the tests run)")) != 0 ||
            (rc = template_vars_set(vars, "fix_policy",
                                    "(decided when the tests run: a fix is attempted only "
                                    "when asked for and the tests fail)")) != 0)
            rc = failure_set(rc, "cannot set the prompt variables");
    }
    return rc;
}

/* The prompt of the review's domain reviewer `reviewer` for the task: the repository's own
 * template on the target branch, else the built-in one (reviewer_prompt.h). */
static int s_reviewer_prompt(char **prompt, const pan_t *pan, const char *dir, const char *reviewer,
                             const json_t *task, template_vars_t *vars)
{
    const json_t *payload = json_object_get(task, "payload");
    const char *target = pan_json_str(payload, "target", "");
    char origin[4200];
    int rc = template_vars_set(vars, "reviewer", reviewer);
    if (rc == 0)
        rc = reviewer_prompt_build(prompt, origin, sizeof origin, pan->config, dir,
                                   pan_json_str(payload, "workspace", ""),
                                   target[0] ? target : "main", reviewer, task, vars);
    if (rc == 0)
        fprintf(stderr, "pan: reviewer %s's prompt, from %s\n", reviewer, origin);
    return rc;
}

int cmd_prompt(const pan_t *pan, int argc, char **argv)
{
    const char *specialist = NULL, *id = NULL, *dir_flag = NULL, *reviewer = NULL;
    for (int i = 0; i < argc; i++) {
        const char *value = NULL;
        int found = pan_option(argc, argv, &i, "--prompts-dir", &value);
        int is_reviewer = found == 0 ? pan_option(argc, argv, &i, "--reviewer", &value) : 0;
        if (found < 0)
            return pan_usage(s_usage, "--prompts-dir needs a value");
        if (is_reviewer < 0)
            return pan_usage(s_usage, "--reviewer needs a value");
        if (found > 0)
            dir_flag = value;
        else if (is_reviewer > 0)
            reviewer = value;
        else if (argv[i][0] == '-')
            return pan_usage_unknown(s_usage, argv[i]);
        else if (specialist == NULL)
            specialist = argv[i];
        else if (id == NULL)
            id = argv[i];
        else
            return pan_usage_unknown(s_usage, argv[i]);
    }
    if (specialist == NULL || id == NULL)
        return pan_usage(s_usage, "which specialist and task id?");
    if (reviewer != NULL && strcmp(specialist, "review-agent") != 0)
        return pan_usage(s_usage, "--reviewer is for review-agent tasks");
    char dir[4096];
    if (dir_flag != NULL)
        snprintf(dir, sizeof dir, "%s", dir_flag);
    else if (prompt_dir(dir, sizeof dir, pan->config, CLOISTER_PROMPTS_DIR) != 0)
        return pan_fail(PAN_EXIT_ERROR, "%s", failure_message());
    char resolved[256];
    int code = pan_task_id_resolve(pan, id, resolved, sizeof resolved);
    if (code != PAN_EXIT_OK)
        return code;
    id = resolved;

    wire_writer_t *writer = wire_writer_new();
    wire_writer_start(writer, MSG_SHOW_TASK);
    wire_put_str(writer, FIELD_ID, id);
    json_t *task = NULL;
    code = pan_call(pan, writer, &task);
    wire_writer_destroy(&writer);
    if (code != PAN_EXIT_OK)
        return code;
    if (!json_is_object(task)) {
        json_decref(task);
        return pan_fail(PAN_EXIT_ERROR, "the broker's answer for task %s is not a task", id);
    }
    /* The session context is computed by the broker at dispatch. */
    if (!json_is_object(json_object_get(task, "context")))
        json_object_set_new(task, "context", json_object());
    template_vars_t *vars = template_vars_new();
    char *prompt = NULL;
    int rc =
        vars ? s_specialist_vars(vars, pan->config, specialist, json_object_get(task, "payload"))
             : failure_set(FAILURE_MEMORY, "out of memory");
    if (rc == 0 && reviewer != NULL)
        rc = s_reviewer_prompt(&prompt, pan, dir, reviewer, task, vars);
    else if (rc == 0)
        rc = prompt_build(&prompt, pan->config, dir, specialist, task, vars);
    if (rc == 0) {
        fputs(prompt, stdout);
        fprintf(stderr, "pan: note: the broker adds the other active tasks and prior attempts "
                        "when it dispatches the task\n");
    } else {
        code = pan_fail(PAN_EXIT_ERROR, "%s", failure_message());
    }
    free(prompt);
    template_vars_destroy(&vars);
    json_decref(task);
    return code;
}
