/* roles: built-in roles, type mapping and custom roles from the repository (see roles.h). */
#include "roles.h"

#include "failure.h"
#include "repo_files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    const char *text;
} role_t;

static const role_t s_roles[] = {
    {"implement",
     "You implement a feature. Make the smallest complete change that meets every acceptance "
     "criterion, follow the project's existing patterns, and add tests for the new "
     "behaviour."},
    {"fix", "You fix a bug. Find the root cause before changing code, fix it there rather than "
            "hiding the symptom, and add a test that fails without the fix."},
    {"refactor",
     "You refactor. Keep behaviour exactly the same, change structure only, and keep the "
     "existing tests passing without weakening them."},
    {"test", "You are the test specialist. Run the project's tests, read the failures carefully, "
             "tell real defects from flaky or environmental failures, and fix only what is simple "
             "and clearly safe."},
    {"document",
     "You write documentation. Be accurate to the code as it is, concise, and consistent "
     "with the project's existing documents."},
    {"review", "You are the code reviewer. Check correctness, tests, security (OWASP top 10: "
               "injection, broken access control, secrets in code, unsafe deserialisation, ...), "
               "performance, consistency with the project's patterns, and whether the change is "
               "complete against its acceptance criteria. Be specific: name the file and line."},
    {"merge",
     "You are the merge specialist. You resolve merge conflicts so that the intent of both "
     "sides survives, keep the project's style, and never change files that have no "
     "conflict."},
};

typedef struct {
    const char *type;
    const char *role;
    const char *needs;
} type_role_t;

static const type_role_t s_types[] = {
    {"feature", "implement", "a new feature: it needs tests of the new behaviour"},
    {"bug", "fix", "a bug fix: it needs the root cause fixed and a regression test"},
    {"bugfix", "fix", "a bug fix: it needs the root cause fixed and a regression test"},
    {"fix", "fix", "a bug fix: it needs the root cause fixed and a regression test"},
    {"refactor", "refactor", "a refactoring: behaviour must not change"},
    {"test", "test", "a change to tests: they must test real behaviour and pass"},
    {"tests", "test", "a change to tests: they must test real behaviour and pass"},
    {"docs", "document", "documentation: it must match the code"},
    {"doc", "document", "documentation: it must match the code"},
    {"documentation", "document", "documentation: it must match the code"},
    {"review", "review", "a review"},
    {"chore", "implement", "maintenance: it must not change behaviour by accident"},
};

static const struct {
    const char *specialist;
    const char *role;
} s_specialist_roles[] = {
    {"review-agent", "review"},
    {"test-agent", "test"},
    {"merge-agent", "merge"},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const type_role_t *s_type(const char *type)
{
    for (size_t i = 0; type != NULL && i < COUNT(s_types); i++)
        if (strcmp(type, s_types[i].type) == 0)
            return &s_types[i];
    return NULL;
}

const char *roles_for_type(const char *type)
{
    const type_role_t *entry = s_type(type);
    return entry ? entry->role : NULL;
}

/* The built-in text of `role`, or NULL when there is none. Static string. */
static const char *s_builtin(const char *role)
{
    for (size_t i = 0; role != NULL && i < COUNT(s_roles); i++)
        if (strcmp(role, s_roles[i].name) == 0)
            return s_roles[i].text;
    return NULL;
}

static int s_valid_name(const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len > ROLES_NAME_MAX)
        return 0;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
            return 0;
    return 1;
}

/* The custom role's text as committed at `rev`, or NULL when there is none. */
static char *s_custom_role(const char *repo, const char *rev, const char *name)
{
    char path[128];
    if (snprintf(path, sizeof path, ".cloister/roles/%s.md", name) >= (int)sizeof path)
        return NULL;
    return repo_files_read(repo, rev, path, ROLES_FILE_MAX);
}

int roles_resolve(char **text, char *name, const char *specialist, const char *type,
                  const char *role, const char *repo, const char *rev)
{
    *text = NULL;
    const char *chosen = NULL;
    if (role != NULL && role[0] != '\0') {
        if (!s_valid_name(role))
            return failure_set(FAILURE_INVALID, "invalid role name '%.64s' (use [a-z0-9_-])", role);
        chosen = role;
    }
    for (size_t i = 0; chosen == NULL && specialist != NULL && i < COUNT(s_specialist_roles); i++)
        if (strcmp(specialist, s_specialist_roles[i].specialist) == 0)
            chosen = s_specialist_roles[i].role;
    if (chosen == NULL)
        chosen = roles_for_type(type);
    if (chosen == NULL)
        chosen = "implement";
    snprintf(name, ROLES_NAME_MAX + 1, "%s", chosen);

    char *custom = s_custom_role(repo, rev, name);
    const char *builtin = s_builtin(name);
    if (custom == NULL && builtin == NULL)
        return failure_set(FAILURE_NOT_FOUND,
                           "unknown role '%s': no built-in role and no .cloister/roles/%s.md", name,
                           name);
    const type_role_t *kind = type != NULL && type[0] != '\0' ? s_type(type) : NULL;
    char source[400];
    if (custom != NULL)
        snprintf(source, sizeof source, "custom, from the repository's .cloister/roles/%s.md on "
                 "%.200s", name, rev);
    else
        snprintf(source, sizeof source, "built-in");
    int n;
    if (kind != NULL)
        n = asprintf(text, "Role: %s (%s)\n\n%s\n\nTask type: %s - %s.\n", name, source,
                     custom ? custom : builtin, kind->type, kind->needs);
    else if (type != NULL && s_valid_name(type))
        n = asprintf(text, "Role: %s (%s)\n\n%s\n\nTask type: %s\n", name, source,
                     custom ? custom : builtin, type);
    else
        n = asprintf(text, "Role: %s (%s)\n\n%s\n", name, source, custom ? custom : builtin);
    free(custom);
    if (n < 0) {
        *text = NULL;
        return failure_set(FAILURE_MEMORY, "out of memory");
    }
    return 0;
}
