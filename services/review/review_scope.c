/* review_scope: the last commit reviewed per issue and branch (see review_scope.h). */
#include "review_scope.h"

#include "failure.h"
#include "home.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define SCOPE_DIR "specialists/review-agent/reviewed"

/* FNV-1a over the three parts, each ended by a NUL, so ("a", "bc") and ("ab", "c") differ. */
static uint64_t s_hash(const char *issue, const char *workspace, const char *branch)
{
    const char *parts[] = {issue ? issue : "", workspace, branch};
    uint64_t hash = 14695981039346656037ULL;
    for (size_t p = 0; p < 3; p++) {
        for (const char *c = parts[p];; c++) {
            hash = (hash ^ (unsigned char)*c) * 1099511628211ULL;
            if (*c == '\0')
                break;
        }
    }
    return hash;
}

static int s_path_of(char *buf, size_t size, const char *issue, const char *workspace,
                     const char *branch, const char *suffix)
{
    char relative[128];
    snprintf(relative, sizeof relative, SCOPE_DIR "/%016llx%s",
             (unsigned long long)s_hash(issue, workspace, branch), suffix);
    return home_path(buf, size, relative);
}

/* Writes `value` to `path` through a temporary file and a rename. */
static int s_write_atomically(const char *path, const json_t *value)
{
    char dir[PATH_MAX], temporary[PATH_MAX + 16];
    if (home_path(dir, sizeof dir, SCOPE_DIR) != 0 || home_mkdirs(dir) != 0)
        return failure_set(FAILURE_IO, "cannot make the directory of reviewed commits");
    snprintf(temporary, sizeof temporary, "%s.%d.tmp", path, (int)getpid());
    if (json_dump_file(value, temporary, JSON_COMPACT) == 0 && rename(temporary, path) == 0)
        return 0;
    int rc = failure_set(FAILURE_IO, "cannot write %s: %s", path, strerror(errno));
    unlink(temporary);
    return rc;
}

/* The record kept for the key under `suffix`, or NULL (none, unreadable, or another key's:
 * a hash that two keys share is told apart by the key kept in the file). Caller owns it. */
static json_t *s_load(const char *issue, const char *workspace, const char *branch,
                      const char *suffix)
{
    char path[PATH_MAX];
    if (s_path_of(path, sizeof path, issue, workspace, branch, suffix) != 0)
        return NULL;
    json_t *record = json_load_file(path, 0, NULL);
    const char *same_branch = json_string_value(json_object_get(record, "branch"));
    const char *same_workspace = json_string_value(json_object_get(record, "workspace"));
    if (same_branch != NULL && strcmp(same_branch, branch) == 0 && same_workspace != NULL &&
        strcmp(same_workspace, workspace) == 0)
        return record;
    json_decref(record);
    return NULL;
}

/* Keeps {issue, workspace, branch, <name>: value} for the key under `suffix`. */
static int s_save(const char *issue, const char *workspace, const char *branch,
                  const char *suffix, const char *name, json_t *value)
{
    char path[PATH_MAX];
    if (s_path_of(path, sizeof path, issue, workspace, branch, suffix) != 0)
        return failure_set(FAILURE_IO, "the path of the review's records is too long");
    json_t *record = json_pack("{s:s, s:s, s:s, s:O}", "issue", issue ? issue : "", "workspace",
                               workspace, "branch", branch, name, value);
    int rc = record != NULL ? s_write_atomically(path, record)
                            : failure_set(FAILURE_MEMORY, "out of memory");
    json_decref(record);
    return rc;
}

int review_scope_last(const char *issue, const char *workspace, const char *branch,
                      char commit[REVIEW_SCOPE_COMMIT_SIZE])
{
    commit[0] = '\0';
    json_t *record = s_load(issue, workspace, branch, ".json");
    const char *recorded = json_string_value(json_object_get(record, "commit"));
    int rc = FAILURE_NOT_FOUND;
    if (recorded != NULL && strlen(recorded) == REVIEW_SCOPE_COMMIT_SIZE - 1) {
        memcpy(commit, recorded, REVIEW_SCOPE_COMMIT_SIZE);
        rc = 0;
    }
    json_decref(record);
    return rc;
}

int review_scope_record(const char *issue, const char *workspace, const char *branch,
                        const char *commit)
{
    json_t *value = json_string(commit);
    int rc = value != NULL ? s_save(issue, workspace, branch, ".json", "commit", value)
                           : failure_set(FAILURE_MEMORY, "out of memory");
    json_decref(value);
    return rc;
}

json_t *review_scope_findings(const char *issue, const char *workspace, const char *branch)
{
    json_t *record = s_load(issue, workspace, branch, ".findings.json");
    json_t *findings = json_object_get(record, "findings");
    json_t *out = json_is_array(findings) ? json_incref(findings) : json_array();
    json_decref(record);
    return out;
}

int review_scope_keep_findings(const char *issue, const char *workspace, const char *branch,
                               const json_t *findings)
{
    return s_save(issue, workspace, branch, ".findings.json", "findings", (json_t *)findings);
}
