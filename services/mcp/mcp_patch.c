/* mcp_patch: apply_patch with libgit2 (see mcp_patch.h). */
#include "mcp_patch.h"

#include "failure.h"

#include <git2.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

/* True when `path` stays inside the work tree: relative, no `..` component, and not in
 * the repository's own `.git`. */
static bool s_path_allowed(const char *path)
{
    if (path == NULL || path[0] == '\0' || path[0] == '/')
        return false;
    const char *part = path;
    while (*part != '\0') {
        size_t len = strcspn(part, "/");
        if ((len == 2 && strncmp(part, "..", 2) == 0) ||
            (len == 4 && strncasecmp(part, ".git", 4) == 0))
            return false;
        part += len;
        while (*part == '/')
            part++;
    }
    return true;
}

/* True when writing `path` in the work tree `workdir` (ending in '/') writes a regular file
 * there and nowhere else: no component on the way is a symbolic link (a committed link
 * to another repository would carry the write out of the tree), each one that exists is a
 * directory, and the file itself, when it exists, is a regular file. Otherwise false, with
 * the reason in failure_message(). */
static bool s_path_stays(const char *workdir, const char *path)
{
    char full[PATH_MAX];
    int n = snprintf(full, sizeof full, "%s%s", workdir, path);
    if (n < 0 || (size_t)n >= sizeof full) {
        failure_set(FAILURE_INVALID, "patch refused: '%s' is too long a path", path);
        return false;
    }
    size_t root = strlen(workdir);
    for (size_t at = root; at <= (size_t)n; at++) {
        if (full[at] != '/' && full[at] != '\0')
            continue;
        bool last = full[at] == '\0';
        full[at] = '\0';
        struct stat st;
        bool exists = lstat(full, &st) == 0;
        bool ok = !exists || (last ? S_ISREG(st.st_mode) : S_ISDIR(st.st_mode));
        if (!ok) {
            failure_set(FAILURE_INVALID, "patch refused: '%s' goes through '%s', which is %s",
                        path, full + root,
                        S_ISLNK(st.st_mode) ? "a symbolic link (it may lead out of the work tree)"
                                            : "not a regular file or directory");
            return false;
        }
        if (!exists)
            return true; /* what is below a missing directory is made by the patch */
        if (!last)
            full[at] = '/';
    }
    return true;
}

/* True when a delta's new side is a regular file (or a deletion): a patch that makes a
 * symbolic link could write through it with its next file. */
static bool s_regular_mode(uint32_t mode)
{
    return mode == 0 || mode == GIT_FILEMODE_BLOB || mode == GIT_FILEMODE_BLOB_EXECUTABLE;
}

/* The delta callback of a one-file check: applies only delta number `wanted`. */
typedef struct {
    size_t wanted;
    size_t seen;
} one_file_t;

static int s_only_one(const git_diff_delta *delta, void *payload)
{
    (void)delta;
    one_file_t *one = payload;
    return one->seen++ == one->wanted ? 0 : 1;
}

static const char *s_git_error(void)
{
    const git_error *error = git_error_last();
    return error && error->message ? error->message : "unknown libgit2 error";
}

/* True when the file a delta creates is already in the work tree: git_apply's check
 * passes it, and only writing it would find the conflict. */
static bool s_creates_existing(git_repository *repo, const git_diff_delta *delta)
{
    char path[PATH_MAX];
    struct stat st;
    return delta->status == GIT_DELTA_ADDED &&
           snprintf(path, sizeof path, "%s%s", git_repository_workdir(repo),
                    delta->new_file.path) < (int)sizeof path &&
           lstat(path, &st) == 0;
}

/* Checks every file on its own; appends its line to `files`. Returns how many fail, or -1
 * when a path is refused (failure_message() says which). */
static int s_check_files(git_repository *repo, git_diff *diff, json_t *files)
{
    int failing = 0;
    size_t n = git_diff_num_deltas(diff);
    for (size_t i = 0; i < n; i++) {
        const git_diff_delta *delta = git_diff_get_delta(diff, i);
        const char *path = delta->new_file.path ? delta->new_file.path : delta->old_file.path;
        if (!s_path_allowed(delta->old_file.path) || !s_path_allowed(delta->new_file.path)) {
            failure_set(FAILURE_INVALID, "patch refused: '%s' is outside the workspace", path);
            return -1;
        }
        if (!s_regular_mode(delta->new_file.mode)) {
            failure_set(FAILURE_INVALID, "patch refused: '%s' would not be a regular file (mode "
                        "%o); apply_patch writes only regular files", path,
                        (unsigned)delta->new_file.mode);
            return -1;
        }
        const char *workdir = git_repository_workdir(repo);
        if (!s_path_stays(workdir, delta->old_file.path) ||
            !s_path_stays(workdir, delta->new_file.path))
            return -1;
        one_file_t one = {.wanted = i};
        git_apply_options options;
        git_apply_options_init(&options, GIT_APPLY_OPTIONS_VERSION);
        options.delta_cb = s_only_one;
        options.payload = &one;
        options.flags = GIT_APPLY_CHECK;
        json_t *line = json_pack("{s:s}", "path", path);
        if (s_creates_existing(repo, delta)) {
            json_object_set_new(line, "ok", json_false());
            json_object_set_new(line, "error", json_string("it already exists in the work tree"));
            failing++;
        } else if (git_apply(repo, diff, GIT_APPLY_LOCATION_WORKDIR, &options) == 0) {
            json_object_set_new(line, "ok", json_true());
        } else {
            json_object_set_new(line, "ok", json_false());
            json_object_set_new(line, "error", json_string(s_git_error()));
            failing++;
        }
        json_array_append_new(files, line);
    }
    return failing;
}

/* ---- plain `diff -u` patches ---- */

/* True when a line of `text` (`len` bytes) starts with `prefix`. */
static bool s_has_line(const char *text, size_t len, const char *prefix)
{
    size_t n = strlen(prefix);
    for (size_t at = 0; at + n <= len;) {
        if (memcmp(text + at, prefix, n) == 0)
            return true;
        const char *next = memchr(text + at, '\n', len - at);
        if (next == NULL)
            break;
        at = (size_t)(next - text) + 1;
    }
    return false;
}

/* The file a plain header line names ("--- a.c\t2024-01-01 10:00" gives "a.c"): after the
 * 4-byte "--- " or "+++ ", up to a TAB or the line's end. */
static void s_header_name(const char *line, size_t len, char *buf, size_t size)
{
    size_t n = len > 4 ? len - 4 : 0;
    const char *name = line + 4;
    const char *tab = memchr(name, '\t', n);
    if (tab != NULL)
        n = (size_t)(tab - name);
    while (n > 0 && (name[n - 1] == '\r' || name[n - 1] == ' '))
        n--;
    snprintf(buf, size, "%.*s", (int)n, name);
}

/* True when a plain header line's time stamp is the Unix epoch, in any time zone: how
 * `diff -N` (and so `diff -ruN`) marks the side where the file does not exist, as GNU
 * patch reads it ("--- old/new.c\t1970-01-01 00:00:00.000000000 +0000"). */
static bool s_epoch_stamp(const char *line, size_t len)
{
    const char *tab = memchr(line, '\t', len);
    if (tab == NULL)
        return false;
    char stamp[80];
    snprintf(stamp, sizeof stamp, "%.*s", (int)(len - (size_t)(tab + 1 - line)), tab + 1);
    struct tm tm = {0};
    int zone = 0;
    char *rest = strptime(stamp, "%Y-%m-%d %H:%M:%S", &tm);
    if (rest == NULL)
        return false;
    rest += strspn(rest, ".0123456789");
    if (sscanf(rest, " %d", &zone) != 1)
        return false;
    long offset = (zone / 100) * 3600L + (zone % 100) * 60L;
    return (long)timegm(&tm) - offset == 0;
}

/* `name` without its first `level` directories, or NULL when it has fewer. */
static const char *s_strip(const char *name, int level)
{
    for (int i = 0; i < level && name != NULL; i++) {
        const char *slash = strchr(name, '/');
        name = slash ? slash + 1 : NULL;
    }
    return name;
}

static bool s_in_tree(const char *workdir, const char *name)
{
    char path[PATH_MAX];
    struct stat st;
    return name != NULL && snprintf(path, sizeof path, "%s%s", workdir, name) < (int)sizeof path &&
           lstat(path, &st) == 0;
}

/* How many leading directories a plain patch's names carry beyond the repository's (patch's
 * -p): the first level at which a file both of whose sides are real is in the work tree;
 * else 1 when a file's two names differ in their first directory alone (`diff -ruN old new`
 * that only adds files); -1 when nothing tells. */
static int s_strip_level(const char *workdir, const char *text, size_t len)
{
    int two_trees = -1;
    for (size_t at = 0; at < len;) {
        const char *line = text + at;
        size_t line_len = strcspn(line, "\n");
        const char *after = line + line_len + (line[line_len] == '\n');
        if (strncmp(line, "--- ", 4) == 0 && strncmp(after, "+++ ", 4) == 0) {
            char old_name[PATH_MAX], new_name[PATH_MAX];
            s_header_name(line, line_len, old_name, sizeof old_name);
            s_header_name(after, strcspn(after, "\n"), new_name, sizeof new_name);
            for (int level = 0; strcmp(old_name, "/dev/null") != 0 &&
                                strcmp(new_name, "/dev/null") != 0 && level < 8;
                 level++)
                if (s_in_tree(workdir, s_strip(new_name, level)))
                    return level;
            const char *old_rest = s_strip(old_name, 1), *new_rest = s_strip(new_name, 1);
            if (old_rest != NULL && new_rest != NULL && strcmp(old_rest, new_rest) == 0 &&
                strcmp(old_name, new_name) != 0)
                two_trees = 1;
        }
        at += line_len + (line[line_len] == '\n');
    }
    return two_trees;
}

/* The repository path of a plain diff's file `name`: a file the patch changes or deletes
 * loses the leading directories that make it one in the work tree; one it creates loses
 * `level` of them (what the others lost: s_strip_level), else a git-style "a/" or "b/". */
static void s_repository_path(const char *workdir, const char *name, bool creates, int level,
                              char *out, size_t size)
{
    for (int l = 0; !creates && l < 8; l++) {
        if (s_in_tree(workdir, s_strip(name, l))) {
            snprintf(out, size, "%s", s_strip(name, l));
            return;
        }
    }
    const char *path = level >= 0 ? s_strip(name, level) : NULL;
    if (path == NULL)
        path = strncmp(name, "a/", 2) == 0 || strncmp(name, "b/", 2) == 0 ? name + 2 : name;
    snprintf(out, size, "%s", path);
}

/* How many lines a hunk range "a,b" (or "a": one line) spans, from `text` on. */
static long s_range_lines(const char *text)
{
    char *end = NULL;
    strtol(text, &end, 10);
    return *end == ',' ? strtol(end + 1, NULL, 10) : 1;
}

/* How many old and new lines a hunk header "@@ -a,b +c,d @@" announces. */
static void s_hunk_counts(const char *line, long *old_lines, long *new_lines)
{
    const char *plus = strstr(line + 3, " +");
    *old_lines = strncmp(line, "@@ -", 4) == 0 ? s_range_lines(line + 4) : 0;
    *new_lines = plus != NULL ? s_range_lines(plus + 2) : 0;
}

/* A plain `diff -u` (or `diff -ruN`) patch written as the git diff libgit2 reads: each
 * file's "--- old" / "+++ new" header (outside a hunk, where "--- " may be a removed line)
 * becomes "diff --git a/P b/P" with "new file" / "deleted file" for /dev/null sides and
 * a/ b/ names; `diff` command lines are dropped; hunks are kept as they are. Returns a new
 * string (caller frees; *out_len its length) or NULL when out of memory. */
static char *s_git_form(const char *workdir, const char *text, size_t len, size_t *out_len)
{
    char *out = NULL;
    FILE *f = open_memstream(&out, out_len);
    if (f == NULL)
        return NULL;
    int level = s_strip_level(workdir, text, len);
    long old_left = 0, new_left = 0;
    for (size_t at = 0; at < len;) {
        const char *line = text + at;
        const char *end = memchr(line, '\n', len - at);
        size_t line_len = end ? (size_t)(end - line) : len - at;
        size_t next = at + line_len + (end ? 1 : 0);
        const char *after = text + next;
        size_t after_len = next < len ? strcspn(after, "\n") : 0;
        bool in_hunk = old_left > 0 || new_left > 0;
        if (in_hunk) {
            if (line[0] == ' ' || line_len == 0) {
                old_left--;
                new_left--;
            } else if (line[0] == '-') {
                old_left--;
            } else if (line[0] == '+') {
                new_left--;
            }
            fwrite(line, 1, next - at, f);
        } else if (line_len >= 4 && strncmp(line, "--- ", 4) == 0 && next < len &&
                   strncmp(after, "+++ ", 4) == 0) {
            char old_name[PATH_MAX], new_name[PATH_MAX], path[PATH_MAX];
            s_header_name(line, line_len, old_name, sizeof old_name);
            s_header_name(after, after_len, new_name, sizeof new_name);
            /* A side that is /dev/null, or (`diff -N`) dated at the epoch with an empty hunk
             * range, is a file the patch creates or deletes. */
            long old_lines = 1, new_lines = 1;
            const char *hunk = next + after_len + 1 < len ? after + after_len + 1 : "";
            if (strncmp(hunk, "@@ ", 3) == 0)
                s_hunk_counts(hunk, &old_lines, &new_lines);
            bool creates = strcmp(old_name, "/dev/null") == 0 ||
                           (old_lines == 0 && s_epoch_stamp(line, line_len));
            bool deletes = strcmp(new_name, "/dev/null") == 0 ||
                           (new_lines == 0 && s_epoch_stamp(after, after_len));
            s_repository_path(workdir, deletes ? old_name : new_name, creates, level, path,
                              sizeof path);
            fprintf(f, "diff --git a/%s b/%s\n%s", path, path,
                    creates   ? "new file mode 100644\n"
                    : deletes ? "deleted file mode 100644\n"
                              : "");
            fprintf(f, "--- %s%s\n+++ %s%s\n", creates ? "" : "a/", creates ? "/dev/null" : path,
                    deletes ? "" : "b/", deletes ? "/dev/null" : path);
            next += after_len + (next + after_len < len ? 1 : 0);
        } else if (line_len >= 3 && strncmp(line, "@@ ", 3) == 0) {
            s_hunk_counts(line, &old_left, &new_left);
            fwrite(line, 1, next - at, f);
        } else if (!(line_len >= 5 && strncmp(line, "diff ", 5) == 0)) {
            fwrite(line, 1, next - at, f);
        }
        at = next;
    }
    if (fclose(f) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

int mcp_patch_apply(const char *workspace, const char *text, size_t len, bool check_only,
                    json_t *files)
{
    git_libgit2_init();
    git_repository *repo = NULL;
    git_diff *diff = NULL;
    char *git_form = NULL;
    int rc = 0;
    if (git_repository_open_ext(&repo, workspace, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) != 0 ||
        git_repository_is_bare(repo)) {
        rc = failure_set(FAILURE_NOT_FOUND, "%s is not the root of a git work tree: %s",
                         workspace, repo ? "the repository is bare" : s_git_error());
    } else if (!s_has_line(text, len, "diff --git ") &&
               (git_form = s_git_form(git_repository_workdir(repo), text, len, &len)) == NULL) {
        rc = failure_set(FAILURE_MEMORY, "out of memory");
    } else if (git_diff_from_buffer(&diff, git_form ? git_form : text, len) != 0) {
        rc = failure_set(FAILURE_INVALID, "not a unified diff: %s", s_git_error());
    } else if (git_diff_num_deltas(diff) == 0) {
        rc = failure_set(FAILURE_INVALID, "the diff names no file (expected `--- a/…` and "
                                          "`+++ b/…` headers and hunks)");
    } else {
        int failing = s_check_files(repo, diff, files);
        if (failing < 0)
            rc = FAILURE_INVALID;
        else if (failing > 0)
            rc = failure_set(FAILURE_STATE, "%d of %zu file(s) do not apply: nothing was written",
                             failing, git_diff_num_deltas(diff));
        else if (!check_only && git_apply(repo, diff, GIT_APPLY_LOCATION_WORKDIR, NULL) != 0)
            rc = failure_set(FAILURE_STATE, "applying the patch: %s", s_git_error());
    }
    git_diff_free(diff);
    free(git_form);
    git_repository_free(repo);
    git_libgit2_shutdown();
    return rc;
}
