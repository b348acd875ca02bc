/* hook_command: one hook command run for one ended task (see hook_command.h). */
#include "hook_command.h"

#include "failure.h"
#include "msgjson.h"
#include "proc.h"
#include "utf8.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The environment a hook gets: "NAME=value" strings (owned), NULL-terminated. */
typedef struct {
    char *vars[16 + HOOK_COMMAND_RESULT_VARS + 1];
    size_t count;
} s_env_t;

/* Adds NAME=value (value cut at HOOK_COMMAND_VALUE_MAX bytes between characters). */
static void s_env_add(s_env_t *env, const char *name, const char *value)
{
    if (value == NULL || env->count + 1 >= sizeof env->vars / sizeof env->vars[0])
        return;
    int cut = (int)utf8_cut(value, HOOK_COMMAND_VALUE_MAX);
    char *var = NULL;
    if (asprintf(&var, "%s=%.*s", name, cut, value) >= 0)
        env->vars[env->count++] = var;
}

static void s_env_clear(s_env_t *env)
{
    for (size_t i = 0; i < env->count; i++)
        free(env->vars[i]);
    env->count = 0;
}

/* CLOISTER_RESULT_<KEY> for each scalar of the result. */
static void s_env_result(s_env_t *env, const json_t *result)
{
    const char *key;
    const json_t *value;
    size_t added = 0;
    json_object_foreach((json_t *)result, key, value)
    {
        if (added == HOOK_COMMAND_RESULT_VARS)
            break;
        char text[64] = "";
        const char *shown = text;
        if (json_is_string(value))
            shown = json_string_value(value);
        else if (json_is_integer(value))
            snprintf(text, sizeof text, "%lld", (long long)json_integer_value(value));
        else if (json_is_real(value))
            snprintf(text, sizeof text, "%g", json_real_value(value));
        else if (json_is_boolean(value))
            shown = json_is_true(value) ? "true" : "false";
        else
            shown = NULL;
        if (shown == NULL)
            continue;
        char name[128] = "CLOISTER_RESULT_";
        size_t n = strlen(name);
        for (const char *c = key; *c != '\0' && n + 1 < sizeof name; c++)
            name[n++] = isalnum((unsigned char)*c) ? (char)toupper((unsigned char)*c) : '_';
        name[n] = '\0';
        s_env_add(env, name, shown);
        added++;
    }
}

static const char *s_str(const json_t *object, const char *key)
{
    return json_string_value(json_object_get(object, key));
}

bool hook_command_run(const char *hook, const char *command, const json_t *event,
                      long timeout_ms, char *outcome, size_t size)
{
    s_env_t env = {.count = 0};
    s_env_add(&env, "CLOISTER_HOOK", hook);
    s_env_add(&env, "CLOISTER_EVENT", s_str(event, "event"));
    s_env_add(&env, "CLOISTER_TASK_ID", s_str(event, "task"));
    s_env_add(&env, "CLOISTER_TASK_STATE", s_str(event, "state"));
    s_env_add(&env, "CLOISTER_SPECIALIST", s_str(event, "specialist"));
    s_env_add(&env, "CLOISTER_ISSUE", s_str(event, "issue"));
    s_env_add(&env, "CLOISTER_TITLE", s_str(event, "title"));
    s_env_add(&env, "CLOISTER_ERROR", s_str(event, "error"));
    s_env_add(&env, "CLOISTER_VERDICT", s_str(event, "verdict"));
    s_env_result(&env, json_object_get(event, "result"));
    env.vars[env.count] = NULL;
    char *input = json_dumps(event, JSON_COMPACT);
    char *const argv[] = {"/bin/sh", "-c", (char *)command, NULL};
    proc_options_t options = {.argv = argv,
                              .env_set = (const char *const *)env.vars,
                              .stdin_data = input,
                              .stdin_len = input ? strlen(input) : 0,
                              .timeout_ms = timeout_ms,
                              .stderr_cap = 1024};
    proc_t *proc = NULL;
    int rc = input ? proc_run(&proc, &options) : failure_set(FAILURE_MEMORY, "out of memory");
    bool ok = false;
    if (rc != 0) {
        snprintf(outcome, size, "cannot run: %s", failure_message());
    } else {
        const proc_status_t *status = proc_status(proc);
        char tail[300];
        utf8_copy(tail, sizeof tail, status->stderr_tail ? status->stderr_tail : "");
        for (char *c = tail; *c != '\0'; c++)
            if ((unsigned char)*c < 0x20)
                *c = ' ';
        for (size_t n = strlen(tail); n > 0 && tail[n - 1] == ' '; n--)
            tail[n - 1] = '\0';
        if (status->stopped_by == PROC_STOP_TIMEOUT)
            snprintf(outcome, size, "killed after the %ld s limit", timeout_ms / 1000);
        else if (!status->exited)
            snprintf(outcome, size, "killed by signal %d", status->term_signal);
        else
            snprintf(outcome, size, "exit %d in %lld ms%s%s", status->exit_code,
                     (long long)status->duration_ms, tail[0] ? ": " : "", tail);
        ok = status->exited && status->exit_code == 0 && status->stopped_by == PROC_STOP_NONE;
    }
    proc_destroy(&proc);
    free(input);
    s_env_clear(&env);
    return ok;
}
