/* bench_conflicts: how fast, and how faithfully, libgit2 finds the conflicting files of a
 * merge in memory, compared with `git merge-tree --write-tree --name-only`.
 *
 *   bench_conflicts <repository> [max_merges=200]
 *
 * Walks the history from HEAD for merge commits (up to max_merges). For each it times
 * git_merge_commits(first parent, second parent) plus the listing of the conflicting paths
 * (what the merge engine does before touching any working tree), then times git merge-tree
 * started with posix_spawn (process start-up included) and compares the two lists. Prints counts,
 * agreements and mean/p50/p99 times for both. Built, not run by ctest;
 * tests/bench/make_synthetic_repo.sh makes a repository to run it on. */
#include "clock.h"

#include <git2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define MAX_PATHS 256

typedef struct {
    char *paths[MAX_PATHS];
    size_t n;
} path_list_t;

static void s_list_add(path_list_t *list, const char *path)
{
    for (size_t i = 0; i < list->n; i++)
        if (strcmp(list->paths[i], path) == 0)
            return;
    if (list->n < MAX_PATHS)
        list->paths[list->n++] = strdup(path);
}

static int s_compare_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void s_list_clear(path_list_t *list)
{
    for (size_t i = 0; i < list->n; i++)
        free(list->paths[i]);
    list->n = 0;
}

static bool s_list_equal(path_list_t *a, path_list_t *b)
{
    qsort(a->paths, a->n, sizeof a->paths[0], s_compare_str);
    qsort(b->paths, b->n, sizeof b->paths[0], s_compare_str);
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->paths[i], b->paths[i]) != 0)
            return false;
    return true;
}

/* libgit2: in-memory merge and its conflicting paths, named as git names them. */
static int s_libgit2_conflicts(git_repository *repo, const git_oid *p1, const git_oid *p2,
                               path_list_t *out)
{
    git_commit *ours = NULL, *theirs = NULL;
    git_index *index = NULL;
    git_merge_options opts;
    git_merge_options_init(&opts, GIT_MERGE_OPTIONS_VERSION);
    int rc = -1;
    if (git_commit_lookup(&ours, repo, p1) < 0 || git_commit_lookup(&theirs, repo, p2) < 0 ||
        git_merge_commits(&index, repo, ours, theirs, &opts) < 0)
        goto out;
    if (git_index_has_conflicts(index)) {
        git_index_conflict_iterator *it = NULL;
        const git_index_entry *anc, *o, *t;
        if (git_index_conflict_iterator_new(&it, index) < 0)
            goto out;
        /* libgit2 splits a rename/modify conflict in two: the old path (ancestor and the
         * side that modified it, the renaming side absent) and the new path (the renaming
         * side alone). git names it by the new path only, so the old path's entry is left
         * out when the renaming side added a path of its own in the same merge. */
        path_list_t gone_ours = {0}, gone_theirs = {0};
        bool added_ours = false, added_theirs = false;
        while (git_index_conflict_next(&anc, &o, &t, it) == 0) {
            if (anc != NULL && o == NULL && t != NULL)
                s_list_add(&gone_ours, anc->path);
            else if (anc != NULL && t == NULL && o != NULL)
                s_list_add(&gone_theirs, anc->path);
            else {
                added_ours = added_ours || (anc == NULL && o != NULL && t == NULL);
                added_theirs = added_theirs || (anc == NULL && t != NULL && o == NULL);
                s_list_add(out, o ? o->path : t ? t->path : anc->path);
            }
        }
        for (size_t i = 0; !added_ours && i < gone_ours.n; i++)
            s_list_add(out, gone_ours.paths[i]);
        for (size_t i = 0; !added_theirs && i < gone_theirs.n; i++)
            s_list_add(out, gone_theirs.paths[i]);
        for (size_t i = 0; i < gone_ours.n; i++)
            free(gone_ours.paths[i]);
        for (size_t i = 0; i < gone_theirs.n; i++)
            free(gone_theirs.paths[i]);
        git_index_conflict_iterator_free(it);
    }
    rc = 0;
out:
    git_index_free(index);
    git_commit_free(ours);
    git_commit_free(theirs);
    return rc;
}

/* git merge-tree --write-tree --name-only: line 1 is the tree, then one conflicting path
 * per line up to an empty line (then informational messages). */
static int s_git_conflicts(const char *repo_path, const char *p1, const char *p2,
                           path_list_t *out)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    /* posix_spawn (vfork-like): git's start does not pay for copying this process's page
     * tables, which hold libgit2's caches. */
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    char *argv[] = {"git", "-C", (char *)repo_path, "merge-tree", "--write-tree", "--name-only",
                    (char *)p1, (char *)p2, NULL};
    pid_t pid;
    int spawned = posix_spawnp(&pid, "git", &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    close(fds[1]);
    size_t size = 1 << 16, used = 0;
    char *buf = malloc(size);
    ssize_t n;
    while (buf != NULL && (n = read(fds[0], buf + used, size - used - 1)) > 0) {
        used += (size_t)n;
        if (used + 1 == size) {
            size *= 2;
            buf = realloc(buf, size);
        }
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (buf == NULL || !WIFEXITED(status) || WEXITSTATUS(status) > 1) {
        free(buf);
        return -1;
    }
    buf[used] = '\0';
    char *rest = strchr(buf, '\n'); /* line 1 is the tree */
    if (rest != NULL)
        rest++;
    if (WEXITSTATUS(status) == 1) {
        while (rest != NULL && *rest != '\0' && *rest != '\n') {
            char *end = strchr(rest, '\n');
            if (end != NULL)
                *end = '\0';
            s_list_add(out, rest);
            rest = end ? end + 1 : NULL;
        }
    }
    free(buf);
    return 0;
}

static int s_compare_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void s_report(const char *name, int64_t *us, size_t n)
{
    if (n == 0)
        return;
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += (double)us[i];
    qsort(us, n, sizeof us[0], s_compare_i64);
    size_t p99 = (n * 99 + 99) / 100;
    printf("%-28s mean %8.2f ms  p50 %8.2f ms  p99 %8.2f ms\n", name, sum / (double)n / 1000.0,
           (double)us[n / 2] / 1000.0, (double)us[(p99 > 0 ? p99 : 1) - 1] / 1000.0);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: %s <repository> [max_merges]\n", argv[0]);
        return 2;
    }
    const char *repo_path = argv[1];
    size_t max = argc > 2 ? (size_t)strtoul(argv[2], NULL, 10) : 200;
    git_libgit2_init();
    git_repository *repo = NULL;
    git_revwalk *walk = NULL;
    if (git_repository_open_ext(&repo, repo_path, 0, NULL) < 0 ||
        git_revwalk_new(&walk, repo) < 0 || git_revwalk_push_head(walk) < 0) {
        fprintf(stderr, "cannot open %s: %s\n", repo_path, git_error_last()->message);
        return 1;
    }
    git_revwalk_sorting(walk, GIT_SORT_TOPOLOGICAL);
    int64_t *lib_us = calloc(max, sizeof *lib_us), *cli_us = calloc(max, sizeof *cli_us);
    size_t merges = 0, agree = 0, lib_conflicted = 0, cli_conflicted = 0, errors = 0;
    git_oid oid;
    while (merges < max && git_revwalk_next(&oid, walk) == 0) {
        git_commit *commit = NULL;
        if (git_commit_lookup(&commit, repo, &oid) < 0)
            continue;
        if (git_commit_parentcount(commit) != 2) {
            git_commit_free(commit);
            continue;
        }
        git_oid p1 = *git_commit_parent_id(commit, 0), p2 = *git_commit_parent_id(commit, 1);
        git_commit_free(commit);
        char h1[GIT_OID_HEXSZ + 1], h2[GIT_OID_HEXSZ + 1];
        git_oid_tostr(h1, sizeof h1, &p1);
        git_oid_tostr(h2, sizeof h2, &p2);
        path_list_t lib = {{0}, 0}, cli = {{0}, 0};

        int64_t start = clock_now_us();
        int lib_rc = s_libgit2_conflicts(repo, &p1, &p2, &lib);
        lib_us[merges] = clock_now_us() - start;
        start = clock_now_us();
        int cli_rc = s_git_conflicts(repo_path, h1, h2, &cli);
        cli_us[merges] = clock_now_us() - start;
        merges++;
        if (lib_rc != 0 || cli_rc != 0) {
            errors++;
            fprintf(stderr, "merge of %.8s + %.8s: %s failed\n", h1, h2,
                    lib_rc != 0 ? "libgit2" : "git merge-tree");
        } else {
            lib_conflicted += lib.n > 0;
            cli_conflicted += cli.n > 0;
            if (s_list_equal(&lib, &cli)) {
                agree++;
            } else {
                printf("disagree %.8s + %.8s: libgit2", h1, h2);
                for (size_t i = 0; i < lib.n; i++)
                    printf(" %s", lib.paths[i]);
                printf(" | git");
                for (size_t i = 0; i < cli.n; i++)
                    printf(" %s", cli.paths[i]);
                printf("\n");
            }
        }
        s_list_clear(&lib);
        s_list_clear(&cli);
    }
    printf("repository %s: %zu merge commits examined\n", repo_path, merges);
    printf("conflicting merges: libgit2 %zu, git merge-tree %zu; file lists agree on %zu/%zu "
           "(%zu errors)\n",
           lib_conflicted, cli_conflicted, agree, merges, errors);
    s_report("libgit2 git_merge_commits", lib_us, merges);
    s_report("git merge-tree (posix_spawn)", cli_us, merges);
    free(lib_us);
    free(cli_us);
    git_revwalk_free(walk);
    git_repository_free(repo);
    git_libgit2_shutdown();
    return 0;
}
