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

static int s_path(char *buf, size_t size, const char *issue, const char *workspace,
                  const char *branch)
{
    char relative[128];
    snprintf(relative, sizeof relative, SCOPE_DIR "/%016llx.json",
             (unsigned long long)s_hash(issue, workspace, branch));
    return home_path(buf, size, relative);
}

int review_scope_last(const char *issue, const char *workspace, const char *branch,
                      char commit[REVIEW_SCOPE_COMMIT_SIZE])
{
    commit[0] = '\0';
    char path[PATH_MAX];
    if (s_path(path, sizeof path, issue, workspace, branch) != 0)
        return FAILURE_NOT_FOUND;
    json_t *record = json_load_file(path, 0, NULL);
    const char *recorded = json_string_value(json_object_get(record, "commit"));
    /* A hash that two keys share is told apart by the key kept in the file. */
    const char *same_branch = json_string_value(json_object_get(record, "branch"));
    const char *same_workspace = json_string_value(json_object_get(record, "workspace"));
    int rc = FAILURE_NOT_FOUND;
    if (recorded != NULL && strlen(recorded) == REVIEW_SCOPE_COMMIT_SIZE - 1 &&
        same_branch != NULL && strcmp(same_branch, branch) == 0 && same_workspace != NULL &&
        strcmp(same_workspace, workspace) == 0) {
        memcpy(commit, recorded, REVIEW_SCOPE_COMMIT_SIZE);
        rc = 0;
    }
    json_decref(record);
    return rc;
}

int review_scope_record(const char *issue, const char *workspace, const char *branch,
                        const char *commit)
{
    char dir[PATH_MAX], path[PATH_MAX], temporary[PATH_MAX + 16];
    if (home_path(dir, sizeof dir, SCOPE_DIR) != 0 || home_mkdirs(dir) != 0 ||
        s_path(path, sizeof path, issue, workspace, branch) != 0)
        return failure_set(FAILURE_IO, "cannot make the directory of reviewed commits");
    snprintf(temporary, sizeof temporary, "%s.%d.tmp", path, (int)getpid());
    json_t *record = json_pack("{s:s, s:s, s:s, s:s}", "issue", issue ? issue : "", "workspace",
                               workspace, "branch", branch, "commit", commit);
    int rc = record != NULL && json_dump_file(record, temporary, JSON_COMPACT) == 0 &&
                     rename(temporary, path) == 0
                 ? 0
                 : failure_set(FAILURE_IO, "cannot record the reviewed commit in %s: %s", path,
                               strerror(errno));
    if (rc != 0)
        unlink(temporary);
    json_decref(record);
    return rc;
}
