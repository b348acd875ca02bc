/* prompt: template + context gatherers + role = the agent's prompt (see prompt.h). */
#include "prompt.h"

#include "context.h"
#include "failure.h"
#include "program.h"
#include "roles.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The prompts an installed program brings: <prefix>/share/cloister/prompts next to its
 * <prefix>/bin (cmake --install). True when that directory exists. */
static bool s_installed_prompts(char *buf, size_t size)
{
    struct stat st;
    return program_beside(buf, size, "../share/cloister/prompts") && stat(buf, &st) == 0 &&
           S_ISDIR(st.st_mode);
}

int prompt_dir(char *buf, size_t size, const config_t *config, const char *builtin)
{
    const char *dir = config ? config_string(config, "agent", "prompts_dir", NULL) : NULL;
    if (dir == NULL || dir[0] == '\0')
        dir = getenv("CLOISTER_PROMPTS");
    char installed[PATH_MAX];
    if ((dir == NULL || dir[0] == '\0') && s_installed_prompts(installed, sizeof installed))
        dir = installed;
    if (dir == NULL || dir[0] == '\0')
        dir = builtin;
    if (dir == NULL || dir[0] == '\0')
        return failure_set(FAILURE_NOT_FOUND,
                           "no prompts directory: set [agent] prompts_dir or CLOISTER_PROMPTS");
    int n = snprintf(buf, size, "%s", dir);
    if (n < 0 || (size_t)n >= size)
        return failure_set(FAILURE_TOO_BIG, "prompts directory path too long");
    return 0;
}

static const char *s_str(const json_t *object, const char *key)
{
    const char *value = json_string_value(json_object_get(object, key));
    return value ? value : "";
}

/* Sets name to value unless the caller set it already. */
static int s_set(template_vars_t *vars, const char *name, const char *value)
{
    if (template_vars_get(vars, name) != NULL)
        return 0;
    return template_vars_set(vars, name, value ? value : "");
}

/* Sets name to a string we own and frees it; a NULL string means the gatherer failed. */
static int s_set_owned(template_vars_t *vars, const char *name, char *value, int rc)
{
    if (rc != 0)
        return rc;
    rc = s_set(vars, name, value);
    free(value);
    return rc;
}

/* Sets name to `text` fenced as data (template_fence_data): what a submitter wrote is read,
 * never obeyed, like the diff. An empty text is `empty` unfenced. */
static int s_set_fenced(template_vars_t *vars, const char *name, const char *label,
                        const char *text, const char *empty)
{
    if (text == NULL || text[0] == '\0')
        return s_set(vars, name, empty);
    char *fenced = template_fence_data(label, text);
    return s_set_owned(vars, name, fenced, fenced ? 0 : FAILURE_MEMORY);
}

/* The title on one line: control characters and backticks become spaces, at most
 * PROMPT_TITLE_MAX bytes (cut between characters), quoted as inline code so it reads as a
 * name, not as instructions. */
static int s_set_title(template_vars_t *vars, const char *title)
{
    if (title == NULL || title[0] == '\0')
        return s_set(vars, "task_title", "(untitled)");
    char line[PROMPT_TITLE_MAX + 8];
    size_t n = 0;
    line[n++] = '`';
    for (size_t i = 0; title[i] != '\0' && n < PROMPT_TITLE_MAX; i++) {
        unsigned char c = (unsigned char)title[i];
        line[n++] = c < 0x20 || c == 0x7f || c == '`' ? ' ' : (char)c;
    }
    while (n > 1 && ((unsigned char)line[n - 1] & 0xC0) == 0x80) /* a cut character */
        n--;
    if (n > 1 && ((unsigned char)line[n - 1] & 0xC0) == 0xC0)
        n--;
    line[n++] = '`';
    line[n] = '\0';
    return s_set(vars, "task_title", line);
}

/* Writes `text` on one line: control characters become spaces, at most `max` bytes (cut
 * between characters). */
static void s_put_line(FILE *f, const char *text, size_t max)
{
    size_t n = strlen(text);
    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80)
            n--;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        fputc(c < 0x20 || c == 0x7f ? ' ' : c, f);
    }
}

/* The hand-off a chained task's prompt starts with (payload.handoff, made by handoff_to):
 *   [System] Handoff from <from> (task <from_task>) to <specialist>: <the context, fenced
 *   as data>
 *   Reason: <reason, one line>
 *   <the request (payload.task), fenced as data>
 * Sets *out to NULL when the payload carries no hand-off. Returns 0 or FAILURE_MEMORY. */
static int s_handoff_block(char **out, const json_t *payload, const char *specialist)
{
    *out = NULL;
    const json_t *handoff = json_object_get(payload, "handoff");
    if (!json_is_object(handoff))
        return 0;
    char *context = template_fence_data("hand-off context (from the agent handing off)",
                                        s_str(handoff, "context")[0] ? s_str(handoff, "context")
                                                                     : "(none given)");
    char *request = s_str(payload, "task")[0]
                        ? template_fence_data("request (from the agent handing off)",
                                              s_str(payload, "task"))
                        : NULL;
    size_t len = 0;
    FILE *f = context ? open_memstream(out, &len) : NULL;
    if (f != NULL) {
        fputs("[System] Handoff from ", f);
        s_put_line(f, s_str(handoff, "from")[0] ? s_str(handoff, "from") : "an agent", 200);
        if (s_str(handoff, "from_task")[0]) {
            fputs(" (task ", f);
            s_put_line(f, s_str(handoff, "from_task"), 200);
            fputc(')', f);
        }
        fputs(" to ", f);
        s_put_line(f, specialist, 200);
        fputs(": ", f);
        fputs(context, f);
        if (s_str(handoff, "reason")[0]) {
            fputs("Reason: ", f);
            s_put_line(f, s_str(handoff, "reason"), 4096);
            fputc('\n', f);
        }
        if (request != NULL)
            fputs(request, f);
        fputc('\n', f);
    }
    int closed = f ? fclose(f) : EOF;
    free(context);
    free(request);
    if (closed != 0 || *out == NULL) {
        free(*out);
        *out = NULL;
        return failure_set(FAILURE_MEMORY, "out of memory");
    }
    return 0;
}

/* The text keywords are taken from: title, description, acceptance, free-text task. */
static char *s_keyword_text(const json_t *task, const json_t *payload)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        return NULL;
    fprintf(f, "%s\n%s\n%s\n", s_str(task, "title"), s_str(payload, "description"),
            s_str(payload, "task"));
    const json_t *acceptance = json_object_get(payload, "acceptance");
    size_t i;
    const json_t *item;
    json_array_foreach(acceptance, i, item)
    {
        const char *line = json_string_value(item);
        fprintf(f, "%s\n", line ? line : "");
    }
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* payload.filesChanged joined with ", ", or "(not given)". */
static char *s_files_changed(const json_t *payload)
{
    const json_t *files = json_object_get(payload, "filesChanged");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        return NULL;
    size_t i, n = 0;
    const json_t *item;
    json_array_foreach(files, i, item)
    {
        const char *file = json_string_value(item);
        if (file == NULL)
            continue;
        fprintf(f, "%s%s", n++ ? ", " : "", file);
    }
    if (n == 0)
        fputs("(not given)", f);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

static size_t s_budget(const config_t *config, const char *key, int64_t fallback)
{
    int64_t value = config ? config_int(config, "context", key, fallback) : fallback;
    return value > 0 ? (size_t)value : 0;
}

/* The repository the context is gathered from (see prompt.h), or NULL. */
static const char *s_repo(const template_vars_t *vars, const json_t *payload)
{
    const char *repo = s_str(payload, "workspace");
    if (repo[0] == '\0')
        repo = template_vars_get(vars, "worktree");
    if (repo == NULL || repo[0] == '\0')
        repo = template_vars_get(vars, "project");
    return repo != NULL && repo[0] != '\0' ? repo : NULL;
}

/* Sets the common placeholders (listed above) in `vars` from `task_json` (the task as the
 * skeleton gives it: specialist_task(ctx)->json, with payload and context; borrowed) and
 * `config` (borrowed); a name the caller already set keeps the caller's value. Returns 0,
 * or FAILURE_INVALID (a bad role override, an unknown role) or FAILURE_MEMORY with the
 * reason in failure_message(). */
static int s_fill_vars(template_vars_t *vars, const config_t *config, const char *specialist,
                       const json_t *task)
{
    const json_t *payload = json_object_get(task, "payload");
    const json_t *context = json_object_get(task, "context");
    const char *repo = s_repo(vars, payload);
    /* The tree and files come from where the agent is told to read (see prompt.h). */
    const char *shown = template_vars_get(vars, "workspace");
    if (shown == NULL || shown[0] == '\0')
        shown = repo;
    const char *description = s_str(payload, "description");
    const char *target = s_str(payload, "target");
    int rc = 0;
    if ((rc = s_set(vars, "task_id", s_str(task, "id"))) != 0 ||
        (rc = s_set_title(vars, s_str(task, "title"))) != 0 ||
        (rc = s_set(vars, "issue",
                    s_str(task, "issue")[0] ? s_str(task, "issue") : s_str(payload, "issueId"))) !=
            0 ||
        (rc = s_set(vars, "specialist", specialist)) != 0 ||
        (rc = s_set(vars, "priority", s_str(task, "priority"))) != 0 ||
        (rc = s_set_fenced(vars, "description", "task description (from the submitter)",
                           description, "(no description given)")) != 0 ||
        (rc = json_is_object(json_object_get(payload, "handoff"))
                  ? s_set(vars, "task_text", "(the hand-off's request, at the top)")
                  : s_set_fenced(vars, "task_text", "request (from the submitter)",
                                 s_str(payload, "task"), "(none)")) != 0 ||
        (rc = s_set(vars, "workspace", repo ? repo : "(not given)")) != 0 ||
        (rc = s_set(vars, "branch", s_str(payload, "branch"))) != 0 ||
        (rc = s_set(vars, "target", target[0] ? target : "main")) != 0 ||
        (rc = s_set(vars, "pr_url",
                    s_str(payload, "prUrl")[0] ? s_str(payload, "prUrl") : "(none)")) != 0)
        return rc;

    char *text = NULL;
    char name[ROLES_NAME_MAX + 1];
    /* The repository speaks through its target branch's commit only (repo_files.h). */
    const char *rev = target[0] ? target : "main";
    rc = roles_resolve(&text, name, specialist, s_str(payload, "type"), s_str(payload, "role"),
                       repo, rev);
    if ((rc = s_set_owned(vars, "role", text, rc)) != 0)
        return rc;
    text = s_files_changed(payload);
    if ((rc = s_set_owned(vars, "files_changed", text, text ? 0 : FAILURE_MEMORY)) != 0)
        return rc;
    rc = context_checklist(&text, json_object_get(payload, "acceptance"));
    if (rc == 0 && json_array_size(json_object_get(payload, "acceptance")) > 0) {
        rc = s_set_fenced(vars, "acceptance", "acceptance criteria (from the submitter)", text,
                          "");
        free(text);
    } else if ((rc = s_set_owned(vars, "acceptance", text, rc)) != 0) {
        return rc;
    }
    if (rc != 0)
        return rc;
    size_t limit = s_budget(config, "session_context_limit", 10);
    rc = context_active_tasks(&text, context, limit);
    if ((rc = s_set_owned(vars, "active_tasks", text, rc)) != 0)
        return rc;
    rc = context_prior_attempts(&text, context, limit);
    if ((rc = s_set_owned(vars, "prior_attempts", text, rc)) != 0)
        return rc;
    rc = context_custom_instructions(&text, config, repo, rev);
    if ((rc = s_set_owned(vars, "custom_instructions", text, rc)) != 0)
        return rc;

    if (shown == NULL) {
        if ((rc = s_set(vars, "repo_tree", "(no repository given)")) != 0)
            return rc;
        return s_set(vars, "relevant_files", "(no repository given)");
    }
    if (template_vars_get(vars, "repo_tree") == NULL) {
        rc = context_tree(&text, shown, s_budget(config, "tree_budget_chars", 4000));
        if (rc == FAILURE_NOT_FOUND)
            rc = s_set(vars, "repo_tree", "(the repository directory does not exist)");
        else if ((rc = s_set_owned(vars, "repo_tree", text, rc)) != 0)
            return rc;
    }
    if (template_vars_get(vars, "relevant_files") == NULL) {
        char *keywords = s_keyword_text(task, payload);
        if (keywords == NULL)
            return failure_set(FAILURE_MEMORY, "out of memory");
        rc = context_relevant_files(&text, shown, keywords,
                                    s_budget(config, "relevant_files_limit", 10),
                                    s_budget(config, "files_budget_chars", 12000));
        free(keywords);
        if (rc == FAILURE_NOT_FOUND)
            rc = s_set(vars, "relevant_files", "(the repository directory does not exist)");
        else
            rc = s_set_owned(vars, "relevant_files", text, rc);
    }
    return rc;
}

/* Drops a leading HTML comment (the template's documentation) and the newlines after it. */
static const char *s_skip_header(const char *text)
{
    const char *p = text;
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
        p++;
    if (strncmp(p, "<!--", 4) != 0)
        return text;
    const char *end = strstr(p + 4, "-->");
    if (end == NULL)
        return text;
    end += 3;
    while (*end == '\n' || *end == '\r')
        end++;
    return end;
}

int prompt_build(char **out, const config_t *config, const char *prompts_dir,
                 const char *specialist, const json_t *task_json, template_vars_t *vars)
{
    *out = NULL;
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s.md", prompts_dir, specialist) >= (int)sizeof path)
        return failure_set(FAILURE_TOO_BIG, "template path too long");
    char *template_text = NULL;
    int rc = template_load(path, &template_text);
    if (rc != 0) {
        char reason[1024];
        /* Copied: failure_set() must not read the buffer it writes. */
        snprintf(reason, sizeof reason, "%s", failure_message());
        return failure_set(rc, "prompt template %s: %s", path, reason);
    }
    rc = prompt_render(out, config, template_text, path, specialist, task_json, vars);
    free(template_text);
    return rc;
}

int prompt_render(char **out, const config_t *config, const char *template_text,
                  const char *origin, const char *specialist, const json_t *task_json,
                  template_vars_t *vars)
{
    *out = NULL;
    char reason[1024];
    template_vars_t *own = NULL;
    if (vars == NULL && (vars = own = template_vars_new()) == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    int rc = s_fill_vars(vars, config, specialist, task_json);
    char *handoff = NULL;
    if (rc == 0)
        rc = s_handoff_block(&handoff, json_object_get(task_json, "payload"), specialist);
    if (rc == 0) {
        const char *body = s_skip_header(template_text);
        rc = template_render(body, vars, out);
        int header_lines = 0;
        for (const char *p = template_text; p < body; p++)
            header_lines += *p == '\n';
        snprintf(reason, sizeof reason, "%s", failure_message());
        if (rc != 0 && header_lines > 0)
            rc = failure_set(rc, "%s: %s (counted after the %d-line header comment)", origin,
                             reason, header_lines);
        else if (rc != 0)
            rc = failure_set(rc, "%s: %s", origin, reason);
    }
    if (rc == 0 && handoff != NULL) {
        char *joined = NULL;
        if (asprintf(&joined, "%s\n%s", handoff, *out) < 0) {
            joined = NULL;
            rc = failure_set(FAILURE_MEMORY, "out of memory");
        }
        free(*out);
        *out = joined;
    }
    free(handoff);
    template_vars_destroy(&own);
    return rc;
}
