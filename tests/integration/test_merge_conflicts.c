/* test_merge_conflicts: the merge engine's conflict detection (merge_conflicts_find) names
 * the conflicting paths as `git merge-tree --write-tree --name-only` does, rename conflicts
 * included, in real repositories made with the git CLI. Each scenario is checked against a
 * fixed expectation and against git itself, and uses git's rename limit, not libgit2's.
 * Unchanged subtrees are skipped, and the tree written from the merge is git's own. */
#include "check.h"
#include "merge_conflicts.h"
#include "testenv.h"
#include "testgit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static testenv_t *s_env;

/* Writes 50 lines to `file` in `repo`, line 10 reading `line10`, then `tail` if any. */
static void s_write_text(const char *repo, const char *file, const char *line10, const char *tail)
{
    char path[1024], text[4096];
    size_t used = 0;
    for (int i = 1; i <= 50; i++)
        used += (size_t)snprintf(text + used, sizeof text - used, "%s\n",
                                 i == 10 ? line10 : "same line in every file, more or less");
    if (tail != NULL)
        snprintf(text + used, sizeof text - used, "%s\n", tail);
    snprintf(path, sizeof path, "%s/%s", repo, file);
    CHECK(testenv_write_file(path, text) == 0);
}

static void s_write_file(const char *repo, const char *file, const char *line10)
{
    s_write_text(repo, file, line10, NULL);
}

/* Two small headers alike in their boilerplate: git scores the pair 36 % similar (under
 * its 50 % rename threshold), libgit2's own metric 57 %. */
static const char *const s_headers[][2] = {
    {"old-header", "/*\n * Copyright (C) the example authors. All rights reserved.\n *\n"
                   " * This file is part of example, distributed under the MIT licence.\n"
                   " * See the COPYING file for terms.\n */\n\n"
                   "#ifndef INCLUDE_win32_findfile_h__\n#define INCLUDE_win32_findfile_h__\n\n"
                   "#include \"util.h\"\n\n"
                   "/** Sets the mock registry root for testing. */\n"
                   "extern int find_set_registry_dir(const wchar_t *mock_sysdir);\n\n"
                   "extern int find_system_dirs(str *out, const char *subpath);\n"
                   "extern int find_global_dirs(str *out);\nextern int find_xdg_dirs(str *out);\n"
                   "extern int find_programdata_dirs(str *out);\n\n#endif\n"},
    {"new-header", "/*\n * Copyright (C) the example authors. All rights reserved.\n *\n"
                   " * This file is part of example, distributed under the MIT licence.\n"
                   " * See the COPYING file for terms.\n */\n\n"
                   "#ifndef INCLUDE_allocators_debugalloc_h__\n"
                   "#define INCLUDE_allocators_debugalloc_h__\n\n"
                   "#include \"util.h\"\n\n#include \"alloc.h\"\n\n"
                   "int debugalloc_init_allocator(allocator *allocator);\n\n#endif\n"},
};

/* Writes the header named `name` (s_headers) to `file` in `repo`, then `tail` if any. */
static void s_write_header(const char *repo, const char *file, const char *name,
                           const char *tail)
{
    char path[1024], text[4096] = "";
    for (size_t i = 0; i < sizeof s_headers / sizeof s_headers[0]; i++)
        if (strcmp(s_headers[i][0], name) == 0)
            snprintf(text, sizeof text, "%s%s", s_headers[i][1], tail ? tail : "");
    CHECK(text[0] != '\0');
    snprintf(path, sizeof path, "%s/%s", repo, file);
    CHECK(testenv_write_file(path, text) == 0);
}

/* Applies "mv A B", "edit F TEXT", "rm F", "add F TEXT", "header F NAME" (write header
 * NAME) or "grow F" (a line more at the end of header F) in `repo`. */
static void s_apply(const char *repo, const char *op)
{
    char verb[16], a[256], b[256];
    if (sscanf(op, "%15s %255s %255s", verb, a, b) < 2) {
        CHECK(!"malformed operation");
        return;
    }
    if (strcmp(verb, "mv") == 0)
        CHECK_INT(testgit_run(repo, "mv", a, b, NULL), 0);
    else if (strcmp(verb, "rm") == 0)
        CHECK_INT(testgit_run(repo, "rm", "-q", a, NULL), 0);
    else if (strcmp(verb, "header") == 0 || strcmp(verb, "grow") == 0) {
        s_write_header(repo, a, strcmp(verb, "grow") == 0 ? "old-header" : b,
                       strcmp(verb, "grow") == 0 ? "/* grown */\n" : NULL);
        CHECK_INT(testgit_run(repo, "add", a, NULL), 0);
    } else {
        s_write_file(repo, a, b);
        CHECK_INT(testgit_run(repo, "add", a, NULL), 0);
    }
}

/* A repository at <env>/<name>: base commit with a.txt, b.txt, c.txt; branch `ours` with
 * the `ours` operations, branch `theirs` with the `theirs` ones (NULL-terminated lists). */
static void s_scenario(char *repo, size_t size, const char *name, const char *const *ours,
                       const char *const *theirs)
{
    snprintf(repo, size, "%s/%s", s_env->dir, name);
    CHECK_INT(testgit_run(s_env->dir, "init", "-q", "-b", "main", repo, NULL), 0);
    s_write_file(repo, "a.txt", "a base");
    s_write_file(repo, "b.txt", "b base");
    s_write_file(repo, "c.txt", "c base");
    s_write_header(repo, "find.h", "old-header", NULL);
    CHECK_INT(testgit_run(repo, "add", ".", NULL), 0);
    CHECK_INT(testgit_run(repo, "commit", "-q", "-m", "base", NULL), 0);
    const char *const *sides[2] = {ours, theirs};
    const char *names[2] = {"ours", "theirs"};
    for (int s = 0; s < 2; s++) {
        CHECK_INT(testgit_run(repo, "checkout", "-q", "-b", names[s], "main", NULL), 0);
        for (size_t i = 0; sides[s][i] != NULL; i++)
            s_apply(repo, sides[s][i]);
        CHECK_INT(testgit_run(repo, "commit", "-q", "-m", names[s], NULL), 0);
    }
}

/* The engine's conflicting paths for ours <- theirs, space-separated, into buf. */
static void s_engine_paths(const char *repo_path, char *buf, size_t size)
{
    buf[0] = '\0';
    merge_repos_t *repos = NULL;
    merge_repo_t *repo = NULL;
    git_oid ours, theirs;
    CHECK_INT(merge_repos_new(&repos), 0);
    CHECK_INT(merge_repos_get(repos, repo_path, &repo), 0);
    if (repo == NULL)
        return;
    CHECK_INT(git_reference_name_to_id(&ours, repo->repo, "refs/heads/ours"), 0);
    CHECK_INT(git_reference_name_to_id(&theirs, repo->repo, "refs/heads/theirs"), 0);
    merge_conflicts_t found;
    CHECK_INT(merge_conflicts_find(&found, repo, &ours, &theirs), 0);
    size_t used = 0;
    for (size_t i = 0; i < found.count && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? " " : "",
                                 found.conflicts[i].path);
    merge_conflicts_clear(&found);
    merge_repos_put(repos, &repo);
    merge_repos_destroy(&repos);
}

/* git merge-tree's conflicting paths (sorted: git lists them in index order), as above. */
static void s_git_paths(const char *repo, char *buf, size_t size)
{
    buf[0] = '\0';
    int rc = testgit_run(repo, "merge-tree", "--write-tree", "--name-only", "ours", "theirs", NULL);
    CHECK(rc == 0 || rc == 1);
    const char *lines = strchr(testgit_out(), '\n');
    size_t used = 0;
    while (rc == 1 && lines != NULL && lines[1] != '\0' && lines[1] != '\n') {
        const char *start = lines + 1, *end = strchr(start, '\n');
        int len = end ? (int)(end - start) : (int)strlen(start);
        used += (size_t)snprintf(buf + used, size - used, "%s%.*s", used ? " " : "", len, start);
        lines = end;
    }
}

static void s_check(const char *name, const char *const *ours, const char *const *theirs,
                    const char *expected)
{
    char repo[512], engine[1024], git[1024];
    s_scenario(repo, sizeof repo, name, ours, theirs);
    s_engine_paths(repo, engine, sizeof engine);
    s_git_paths(repo, git, sizeof git);
    if (strcmp(engine, expected) != 0 || strcmp(git, expected) != 0)
        fprintf(stderr, "%s: engine [%s], git [%s], expected [%s]\n", name, engine, git, expected);
    CHECK_STR(engine, expected);
    CHECK_STR(git, expected);
}

static void test_rename_conflicts(void)
{
    /* rename/modify, both ways round */
    s_check("rename-modify", (const char *[]){"mv a.txt x.txt", "edit x.txt OURS", NULL},
            (const char *[]){"edit a.txt THEIRS", NULL}, "x.txt");
    s_check("modify-rename", (const char *[]){"edit a.txt OURS", NULL},
            (const char *[]){"mv a.txt x.txt", "edit x.txt THEIRS", NULL}, "x.txt");
    s_check("rename-delete", (const char *[]){"mv a.txt x.txt", NULL},
            (const char *[]){"rm a.txt", NULL}, "x.txt");
    s_check("rename-add", (const char *[]){"mv a.txt x.txt", NULL},
            (const char *[]){"add x.txt new", NULL}, "x.txt");
    s_check("both-renamed-alike", (const char *[]){"mv a.txt x.txt", "edit x.txt OURS", NULL},
            (const char *[]){"mv a.txt x.txt", "edit x.txt THEIRS", NULL}, "x.txt");
    s_check("rename-rename-2to1", (const char *[]){"mv a.txt x.txt", NULL},
            (const char *[]){"mv b.txt x.txt", NULL}, "x.txt");
    s_check("rename-rename-1to2", (const char *[]){"mv a.txt x.txt", NULL},
            (const char *[]){"mv a.txt y.txt", NULL}, "a.txt x.txt y.txt");
    /* Not renames: the old path's own conflicts stay. */
    s_check("modify-delete", (const char *[]){"edit a.txt OURS", NULL},
            (const char *[]){"rm a.txt", NULL}, "a.txt");
    s_check("both-modified", (const char *[]){"edit a.txt OURS", "edit b.txt OURS", NULL},
            (const char *[]){"edit a.txt THEIRS", "edit b.txt THEIRS", NULL}, "a.txt b.txt");
    s_check("clean", (const char *[]){"mv a.txt x.txt", NULL},
            (const char *[]){"edit b.txt THEIRS", NULL}, "");
}

/* Which deleted file a new one continues is git's call: its similarity score, and only
 * files the other side changed too. libgit2's own rules, in each case, make a rename git
 * does not see and a conflict git does not have (or lists elsewhere). */
static void test_rename_similarity(void)
{
    /* The two headers are 36 % alike for git: a deletion and an addition, so theirs' edit
     * is a modify/delete at the old path (libgit2's metric: a rename, theirs' edit merged
     * into alloc.h, no conflict). */
    s_check("dissimilar-headers-modified",
            (const char *[]){"rm find.h", "header alloc.h new-header", NULL},
            (const char *[]){"grow find.h", NULL}, "find.h");
    /* ... and with both sides deleting it, no conflict (libgit2's: rename/delete). */
    s_check("dissimilar-headers-deleted",
            (const char *[]){"rm find.h", "header alloc.h new-header", NULL},
            (const char *[]){"rm find.h", NULL}, "");
    /* Theirs renames a.txt to x.txt (98 % alike) and ours, leaving a.txt alone, adds the
     * same x.txt: git does not look for renames of a file the other side did not change,
     * so both added x.txt alike and the merge is clean (libgit2's: rename/add). */
    s_check("rename-of-file-other-side-kept",
            (const char *[]){"add x.txt NEW", NULL},
            (const char *[]){"rm a.txt", "add x.txt NEW", NULL}, "");
}

/* Theirs moves more files than libgit2's default rename limit (1000 changed entries)
 * covers, editing each a little, while ours edits one of them: git (limit 7000) sees the
 * renames and merges cleanly; under libgit2's default the moved file would read as deleted
 * and conflict with ours' edit. */
static void test_rename_limit(void)
{
    char repo[512];
    snprintf(repo, sizeof repo, "%s/many", s_env->dir);
    CHECK_INT(testgit_run(s_env->dir, "init", "-q", "-b", "main", repo, NULL), 0);
    char file[64], line[64];
    for (int i = 0; i < 520; i++) {
        snprintf(file, sizeof file, "f%03d.txt", i);
        snprintf(line, sizeof line, "file-%d", i);
        s_write_file(repo, file, line);
    }
    CHECK_INT(testgit_run(repo, "add", ".", NULL), 0);
    CHECK_INT(testgit_run(repo, "commit", "-q", "-m", "base", NULL), 0);
    CHECK_INT(testgit_run(repo, "checkout", "-q", "-b", "ours", "main", NULL), 0);
    s_write_file(repo, "f007.txt", "ours edits f007");
    CHECK_INT(testgit_run(repo, "commit", "-q", "-am", "ours", NULL), 0);
    CHECK_INT(testgit_run(repo, "checkout", "-q", "-b", "theirs", "main", NULL), 0);
    char path[600];
    for (int i = 0; i < 520; i++) {
        snprintf(file, sizeof file, "f%03d.txt", i);
        snprintf(path, sizeof path, "moved/%s", file);
        snprintf(line, sizeof line, "file-%d", i);
        s_write_text(repo, path, line, "moved");
        snprintf(path, sizeof path, "%s/%s", repo, file);
        unlink(path);
    }
    CHECK_INT(testgit_run(repo, "add", "-A", ".", NULL), 0);
    CHECK_INT(testgit_run(repo, "commit", "-q", "-m", "theirs", NULL), 0);

    git_repository *r = NULL;
    CHECK_INT(git_repository_open(&r, repo), 0);
    CHECK_INT(merge_conflicts_rename_limit(r), MERGE_CONFLICTS_RENAME_LIMIT);
    git_repository_free(r);
    char engine[1024], git[1024];
    s_engine_paths(repo, engine, sizeof engine);
    s_git_paths(repo, git, sizeof git);
    CHECK_STR(git, "");
    CHECK_STR(engine, "");

    /* The repository's own setting wins, as in git: under a limit of 10 both see the
     * deletion, a modify/delete conflict. */
    CHECK_INT(testgit_run(repo, "config", "merge.renameLimit", "10", NULL), 0);
    CHECK_INT(git_repository_open(&r, repo), 0);
    CHECK_INT(merge_conflicts_rename_limit(r), 10);
    git_repository_free(r);
    s_engine_paths(repo, engine, sizeof engine);
    CHECK_STR(engine, "f007.txt");
}

/* git merge-tree's tree id for ours <- theirs (its first line) into buf. */
static void s_git_tree(const char *repo, char *buf, size_t size)
{
    CHECK_INT(testgit_run(repo, "merge-tree", "--write-tree", "ours", "theirs", NULL), 0);
    snprintf(buf, size, "%.40s", testgit_out());
}

/* A tree of directories most of which neither side touches: they are skipped (not read,
 * placeholders in the merged index), the merge finds the same conflicts, and the tree the
 * engine writes is git's, byte for byte -- the skipped directories back in place. */
static void test_unchanged_subtrees(void)
{
    const char *base[] = {"add lib/util/u.txt u",   "add lib/util/deep/d.txt d",
                          "add lib/core/c.txt c",   "add docs/guide.txt g",
                          "add src/main.txt m",     "add src/io/io.txt io",
                          "add src/io/net/n.txt n", "add lib.c l",
                          "add lib-x.txt x",        NULL};
    /* lib.c and lib-x.txt sort around lib/ differently once lib is a placeholder (a
     * gitlink sorts as "lib", a directory as "lib/"): the sides must still line up. */
    const char *ours[] = {"edit src/main.txt OURS", "edit a.txt OURS", "edit lib.c OURS", NULL};
    const char *theirs[] = {
        "edit src/io/net/n.txt THEIRS", "mv b.txt src/b.txt", "edit c.txt THEIRS",
        "edit lib-x.txt THEIRS",        "add lib.d d",        NULL};
    char repo[512];
    snprintf(repo, sizeof repo, "%s/nested", s_env->dir);
    CHECK_INT(testgit_run(s_env->dir, "init", "-q", "-b", "main", repo, NULL), 0);
    s_write_file(repo, "a.txt", "a base");
    s_write_file(repo, "b.txt", "b base");
    s_write_file(repo, "c.txt", "c base");
    for (size_t i = 0; base[i] != NULL; i++)
        s_apply(repo, base[i]);
    CHECK_INT(testgit_run(repo, "add", ".", NULL), 0);
    CHECK_INT(testgit_run(repo, "commit", "-q", "-m", "base", NULL), 0);
    const char *const *sides[2] = {ours, theirs};
    const char *names[2] = {"ours", "theirs"};
    for (int s = 0; s < 2; s++) {
        CHECK_INT(testgit_run(repo, "checkout", "-q", "-b", names[s], "main", NULL), 0);
        for (size_t i = 0; sides[s][i] != NULL; i++)
            s_apply(repo, sides[s][i]);
        CHECK_INT(testgit_run(repo, "commit", "-q", "-m", names[s], NULL), 0);
    }

    merge_repos_t *repos = NULL;
    merge_repo_t *lent = NULL;
    CHECK_INT(merge_repos_new(&repos), 0);
    CHECK_INT(merge_repos_get(repos, repo, &lent), 0);
    if (lent == NULL)
        return;
    git_oid o, t;
    CHECK_INT(git_reference_name_to_id(&o, lent->repo, "refs/heads/ours"), 0);
    CHECK_INT(git_reference_name_to_id(&t, lent->repo, "refs/heads/theirs"), 0);
    merge_conflicts_t merge;
    CHECK_INT(merge_conflicts_find(&merge, lent, &o, &t), 0);
    CHECK_INT(merge.count, 0);
    /* Skipped: the directories no side changed, at the highest level they are unchanged. */
    char skipped[512] = "";
    size_t used = 0;
    for (size_t i = 0; i < merge.skipped_count; i++)
        used += (size_t)snprintf(skipped + used, sizeof skipped - used, "%s%s", i ? " " : "",
                                 merge.skipped[i]);
    CHECK_STR(skipped, "docs lib");
    git_oid tree;
    CHECK_INT(merge_conflicts_write_tree(&tree, &merge, lent->repo), 0);
    char engine_tree[41], git_tree[64];
    git_oid_tostr(engine_tree, sizeof engine_tree, &tree);
    s_git_tree(repo, git_tree, sizeof git_tree);
    CHECK_STR(engine_tree, git_tree);
    merge_conflicts_clear(&merge);

    /* A conflict below unchanged neighbours: found, and once resolved the tree is whole. */
    CHECK_INT(testgit_run(repo, "checkout", "-q", "ours", NULL), 0);
    s_apply(repo, "edit src/io/net/n.txt OURS");
    CHECK_INT(testgit_run(repo, "commit", "-q", "-m", "ours conflicts", NULL), 0);
    CHECK_INT(git_reference_name_to_id(&o, lent->repo, "refs/heads/ours"), 0);
    CHECK_INT(merge_conflicts_find(&merge, lent, &o, &t), 0);
    CHECK_INT(merge.count, 1);
    CHECK_STR(merge.count == 1 ? merge.conflicts[0].path : "", "src/io/net/n.txt");
    CHECK(merge.skipped_count == 2);
    const git_index_entry *anc = NULL, *our = NULL, *their = NULL;
    CHECK_INT(git_index_conflict_get(&anc, &our, &their, merge.index, "src/io/net/n.txt"), 0);
    git_index_entry resolved = *our;
    resolved.path = "src/io/net/n.txt"; /* the entry's own goes with the conflict */
    CHECK_INT(git_index_conflict_remove(merge.index, "src/io/net/n.txt"), 0);
    resolved.flags = 0;
    CHECK_INT(git_index_add(merge.index, &resolved), 0);
    CHECK_INT(merge_conflicts_write_tree(&tree, &merge, lent->repo), 0);
    git_oid_tostr(engine_tree, sizeof engine_tree, &tree);
    CHECK_INT(testgit_run(repo, "ls-tree", "-r", engine_tree, NULL), 0);
    CHECK(strstr(testgit_out(), "lib/util/deep/d.txt") != NULL);
    CHECK(strstr(testgit_out(), "docs/guide.txt") != NULL);
    CHECK(strstr(testgit_out(), "commit") == NULL);
    CHECK_INT(testgit_run(repo, "show", "ours:src/io/net/n.txt", NULL), 0);
    char ours_text[4096];
    snprintf(ours_text, sizeof ours_text, "%s", testgit_out());
    char spec[128];
    snprintf(spec, sizeof spec, "%s:src/io/net/n.txt", engine_tree);
    CHECK_INT(testgit_run(repo, "show", spec, NULL), 0);
    CHECK_STR(testgit_out(), ours_text);
    merge_conflicts_clear(&merge);
    merge_repos_put(repos, &lent);
    merge_repos_destroy(&repos);
}

int main(void)
{
    s_env = testenv_new("merge-conflicts");
    if (s_env == NULL)
        return 1;
    char home[600];
    snprintf(home, sizeof home, "%s/gh", s_env->dir);
    testgit_env(home);
    if (testgit_run(s_env->dir, "merge-tree", "-h", NULL) < 0) {
        fprintf(stderr, "test_merge_conflicts: no git to compare with\n");
        testenv_destroy(&s_env);
        return 1;
    }
    git_libgit2_init();
    test_rename_conflicts();
    test_rename_similarity();
    test_rename_limit();
    test_unchanged_subtrees();
    git_libgit2_shutdown();
    testenv_destroy(&s_env);
    return check_exit_code("test_merge_conflicts");
}
