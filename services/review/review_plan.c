/* review_plan: which reviewers apply (see review_plan.h). */
#include "review_plan.h"

#include "reviewer_prompt.h"

#include <fnmatch.h>
#include <stdbool.h>
#include <string.h>

typedef struct {
    bool docs, tests, headers, code;
} s_kinds_t;

/* True when one of the path's directories is `dir`. */
static bool s_under(const char *path, const char *dir)
{
    size_t len = strlen(dir);
    for (const char *p = path; p != NULL; p = strchr(p, '/')) {
        if (*p == '/')
            p++;
        if (strncmp(p, dir, len) == 0 && p[len] == '/')
            return true;
    }
    return false;
}

/* True when the file name (the last part of path) matches one of the patterns. */
static bool s_named(const char *path, const char *const *patterns)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    for (size_t i = 0; patterns[i] != NULL; i++)
        if (fnmatch(patterns[i], base, FNM_CASEFOLD) == 0)
            return true;
    return false;
}

static s_kinds_t s_classify(const char *const *paths, size_t npaths)
{
    static const char *const docs[] = {"*.md", "*.markdown", "*.rst", "*.adoc", "*.txt",
                                       "README*", "CHANGELOG*", "LICENSE*", "CONTRIBUTING*",
                                       NULL};
    static const char *const tests[] = {"test_*", "*_test.*", "*.test.*", "*.spec.*", NULL};
    static const char *const headers[] = {"*.h", "*.hh", "*.hpp", NULL};
    s_kinds_t k = {0};
    for (size_t i = 0; i < npaths; i++) {
        const char *path = paths[i];
        if (s_named(path, docs) || s_under(path, "doc") || s_under(path, "docs"))
            k.docs = true;
        else if (s_named(path, tests) || s_under(path, "test") || s_under(path, "tests") ||
                 s_under(path, "spec") || s_under(path, "__tests__"))
            k.tests = true;
        else if (s_named(path, headers))
            k.headers = true;
        else
            k.code = true;
    }
    return k;
}

/* Why reviewer `name` does not apply to a diff of these kinds, or NULL when it does. */
static const char *s_skip_reason(const char *name, const s_kinds_t *k)
{
    bool only_docs = k->docs && !k->tests && !k->headers && !k->code;
    if (strcmp(name, "correctness") == 0 && only_docs)
        return "docs-only change";
    if (strcmp(name, "tests") == 0 && !k->code && !k->headers)
        return only_docs ? "docs-only change" : "no code changed (only tests or docs)";
    if (strcmp(name, "performance") == 0 && !k->code)
        return "no code changed (only docs, tests or headers)";
    if (strcmp(name, "docs") == 0 && !k->docs && !k->headers)
        return "no docs, README or public header changed";
    return NULL;
}

void review_plan_skip(json_t *skips, const char *reviewer, const char *reason)
{
    json_array_append_new(skips, json_pack("{s:s, s:s}", "reviewer", reviewer, "reason", reason));
}

size_t review_plan(const char *const *names, size_t n, const char *const *paths, size_t npaths,
                   const char **run, json_t *skips)
{
    s_kinds_t kinds = s_classify(paths, npaths);
    size_t planned = 0;
    for (size_t i = 0; i < n; i++) {
        const char *reason = NULL;
        for (size_t j = 0; j < i && reason == NULL; j++)
            if (strcmp(names[i], names[j]) == 0)
                reason = "listed twice";
        if (reason == NULL && reviewer_name_check(names[i]) != 0)
            reason = "not a valid reviewer name";
        if (reason == NULL && npaths == 0)
            reason = "empty diff";
        if (reason == NULL)
            reason = s_skip_reason(names[i], &kinds);
        if (reason != NULL)
            review_plan_skip(skips, names[i], reason);
        else
            run[planned++] = names[i];
    }
    return planned;
}
