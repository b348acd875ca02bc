/* reviewer_prompt: see reviewer_prompt.h. */
#include "reviewer_prompt.h"

#include "failure.h"
#include "prompt.h"
#include "repository.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The specialist whose role and placeholders the reviewers share. */
#define S_SPECIALIST "review-agent"

int reviewer_name_check(const char *name)
{
    size_t len = name != NULL ? strlen(name) : 0;
    bool ok = len > 0 && len <= REVIEWER_NAME_MAX && name[0] >= 'a' && name[0] <= 'z' &&
              strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-_") == len &&
              strcmp(name, REVIEWER_SYNTHESIS) != 0;
    return ok ? 0
              : failure_set(FAILURE_INVALID,
                            "reviewer name '%.64s': expected [a-z][a-z0-9_-]* (at most %d "
                            "characters), not '%s'",
                            name ? name : "", REVIEWER_NAME_MAX, REVIEWER_SYNTHESIS);
}

/* Loads <prompts_dir>/review/<name>.md into *text, its path into origin. */
static int s_load_builtin(char **text, char *origin, size_t origin_size, const char *prompts_dir,
                          const char *name)
{
    if (snprintf(origin, origin_size, "%s/review/%s.md", prompts_dir, name) >= (int)origin_size)
        return failure_set(FAILURE_TOO_BIG, "template path too long");
    int rc = template_load(origin, text);
    if (rc != 0) {
        char reason[1024];
        snprintf(reason, sizeof reason, "%s", failure_message());
        return failure_set(rc, "prompt template %s: %s", origin, reason);
    }
    return 0;
}

int reviewer_prompt_build(char **out, char *origin, size_t origin_size, const config_t *config,
                          const char *prompts_dir, const char *workspace, const char *target,
                          const char *name, const json_t *task_json, template_vars_t *vars)
{
    *out = NULL;
    int rc = reviewer_name_check(name);
    if (rc != 0)
        return rc;
    char *text = NULL;
    if (workspace != NULL && workspace[0] != '\0' && target != NULL && target[0] != '\0') {
        char path[128];
        snprintf(path, sizeof path, "%s/%s.md", REVIEWER_REPO_DIR, name);
        rc = repository_file_at(workspace, target, path, &text);
        if (rc != 0 && rc != FAILURE_NOT_FOUND)
            return rc;
        if (text != NULL)
            snprintf(origin, origin_size, "%.255s:%s", target, path);
    }
    if (text == NULL && (rc = s_load_builtin(&text, origin, origin_size, prompts_dir, name)) != 0)
        return rc;
    rc = prompt_render(out, config, text, origin, S_SPECIALIST, task_json, vars);
    free(text);
    return rc;
}

int reviewer_synthesis_prompt(char **out, const config_t *config, const char *prompts_dir,
                              const json_t *task_json, template_vars_t *vars)
{
    *out = NULL;
    char origin[4096];
    char *text = NULL;
    int rc = s_load_builtin(&text, origin, sizeof origin, prompts_dir, REVIEWER_SYNTHESIS);
    if (rc == 0)
        rc = prompt_render(out, config, text, origin, S_SPECIALIST, task_json, vars);
    free(text);
    return rc;
}
