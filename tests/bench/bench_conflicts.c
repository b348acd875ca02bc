/* bench_conflicts: the merge engine's conflict detection replayed on a real history,
 * against `git merge-tree --write-tree --name-only`, in the same run.
 *
 *   bench_conflicts <repository> [max_merges]
 *
 * Walks the history from HEAD and takes every two-parent merge commit (up to max_merges,
 * default all). For each, first parent = ours, second = theirs:
 *   engine  the merge engine's own steps for a task: the workspace's repository handle
 *           from a merge_repos set (kept from merge to merge, fingerprint checked), then
 *           merge_conflicts_find() (merge_conflicts.h: the in-memory merge and the
 *           conflicting paths as the engine lists them), then the handle put back;
 *   git     `git merge-tree --write-tree --name-only <ours> <theirs>` started with
 *           posix_spawn, its output read to the end (process start-up included).
 * Prints each merge whose verdict (conflicting or not) or set of conflicting paths differs,
 * with the paths only one side names; then the counts, and mean/p50/p90/p99 of both sides.
 * For a merge both call clean, the engine's merged tree (merge_conflicts_write_tree, after
 * its clock stops) is compared with the tree git printed: the skipped directories must
 * come back whole.
 * Built, not run by ctest; tests/bench/make_synthetic_repo.sh makes a repository to run it
 * on when no real one is at hand. */
#include "clock.h"
#include "merge_conflicts.h"
#include "merge_repos.h"

#include <fcntl.h>
#include <git2.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef struct {
    char **paths;
    size_t n;
    char tree[GIT_OID_HEXSZ + 1]; /* the merged tree (git: always; engine: clean merges) */
} path_list_t;

static void s_list_add(path_list_t *list, const char *path, size_t len)
{
    char **grown = realloc(list->paths, (list->n + 1) * sizeof *grown);
    if (grown == NULL)
        abort();
    list->paths = grown;
    list->paths[list->n] = strndup(path, len);
    if (list->paths[list->n] == NULL)
        abort();
    list->n++;
}

static int s_compare_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void s_list_clear(path_list_t *list)
{
    for (size_t i = 0; i < list->n; i++)
        free(list->paths[i]);
    free(list->paths);
    list->paths = NULL;
    list->n = 0;
}

/* The engine's conflicting paths of ours <- theirs, as a task of the engine finds them;
 * *tree_us: the time to write the merged tree of a clean merge (out->tree), which is not
 * part of the detection's time. */
static int s_engine_conflicts(merge_repos_t *repos, const char *repo_path, const git_oid *ours,
                              const git_oid *theirs, path_list_t *out, int64_t *detect_us)
{
    int64_t start = clock_now_us();
    merge_repo_t *lent = NULL;
    if (merge_repos_get(repos, repo_path, &lent) != 0)
        return -1;
    merge_conflicts_t found;
    int rc = merge_conflicts_find(&found, lent, ours, theirs);
    for (size_t i = 0; rc == 0 && i < found.count; i++)
        s_list_add(out, found.conflicts[i].path, strlen(found.conflicts[i].path));
    *detect_us = clock_now_us() - start;
    git_oid tree;
    if (rc == 0 && found.count == 0 && merge_conflicts_write_tree(&tree, &found, lent->repo) == 0)
        git_oid_tostr(out->tree, sizeof out->tree, &tree);
    merge_conflicts_clear(&found);
    merge_repos_put(repos, &lent);
    return rc;
}

/* git merge-tree --write-tree --name-only: line 1 is the tree, then one conflicting path
 * per line up to an empty line (then informational messages). Exit 1: conflicts. */
static int s_git_conflicts(const char *repo_path, const char *ours, const char *theirs,
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
    char *argv[] = {"git",         "-C",         (char *)repo_path, "merge-tree", "--write-tree",
                    "--name-only", (char *)ours, (char *)theirs,    NULL};
    pid_t pid;
    int spawned = posix_spawnp(&pid, "git", &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    if (spawned != 0) {
        close(fds[0]);
        return -1;
    }
    size_t size = 1 << 16, used = 0;
    char *buf = malloc(size);
    ssize_t n;
    while (buf != NULL && (n = read(fds[0], buf + used, size - used - 1)) > 0) {
        used += (size_t)n;
        if (used + 1 == size) {
            size *= 2;
            char *grown = realloc(buf, size);
            if (grown == NULL)
                free(buf);
            buf = grown;
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
    snprintf(out->tree, sizeof out->tree, "%.40s", buf);
    char *line = strchr(buf, '\n'); /* line 1 is the tree */
    while (WEXITSTATUS(status) == 1 && line != NULL && line[1] != '\0' && line[1] != '\n') {
        char *start = line + 1;
        line = strchr(start, '\n');
        s_list_add(out, start, line ? (size_t)(line - start) : strlen(start));
    }
    free(buf);
    return 0;
}

/* Prints the paths of `a` that `b` lacks (both sorted). */
static void s_print_missing(const char *label, const path_list_t *a, const path_list_t *b)
{
    printf(" %s:", label);
    size_t j = 0, printed = 0;
    for (size_t i = 0; i < a->n; i++) {
        while (j < b->n && strcmp(b->paths[j], a->paths[i]) < 0)
            j++;
        if (j == b->n || strcmp(b->paths[j], a->paths[i]) != 0) {
            printf(" %s", a->paths[i]);
            printed++;
        }
    }
    if (printed == 0)
        printf(" -");
}

static bool s_lists_equal(path_list_t *a, path_list_t *b)
{
    if (a->n > 1)
        qsort(a->paths, a->n, sizeof a->paths[0], s_compare_str);
    if (b->n > 1)
        qsort(b->paths, b->n, sizeof b->paths[0], s_compare_str);
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->paths[i], b->paths[i]) != 0)
            return false;
    return true;
}

static int s_compare_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The q-th percentile (nearest rank) of n sorted values. */
static double s_percentile_ms(const int64_t *sorted, size_t n, int q)
{
    size_t rank = (n * (size_t)q + 99) / 100;
    return (double)sorted[(rank > 0 ? rank : 1) - 1] / 1000.0;
}

static double s_report(const char *name, int64_t *us, size_t n)
{
    if (n == 0)
        return 0;
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += (double)us[i];
    qsort(us, n, sizeof us[0], s_compare_i64);
    printf("%-44s mean %7.2f ms  p50 %7.2f ms  p90 %7.2f ms  p99 %7.2f ms\n", name,
           sum / (double)n / 1000.0, s_percentile_ms(us, n, 50), s_percentile_ms(us, n, 90),
           s_percentile_ms(us, n, 99));
    return s_percentile_ms(us, n, 50);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3 || argv[1][0] == '-') {
        fprintf(stderr, "usage: %s <repository> [max_merges]\n", argv[0]);
        return 2;
    }
    const char *repo_path = argv[1];
    size_t max = argc > 2 ? (size_t)strtoul(argv[2], NULL, 10) : SIZE_MAX;
    git_libgit2_init();
    git_repository *walk_repo = NULL;
    git_revwalk *walk = NULL;
    if (git_repository_open_ext(&walk_repo, repo_path, 0, NULL) < 0 ||
        git_revwalk_new(&walk, walk_repo) < 0 || git_revwalk_push_head(walk) < 0) {
        fprintf(stderr, "cannot open %s: %s\n", repo_path, git_error_last()->message);
        return 1;
    }
    git_revwalk_sorting(walk, GIT_SORT_TOPOLOGICAL);
    /* The merges first: the walk is not part of either side's time. */
    git_oid *pairs = NULL;
    size_t merges = 0;
    git_oid oid;
    while (merges < max && git_revwalk_next(&oid, walk) == 0) {
        git_commit *commit = NULL;
        if (git_commit_lookup(&commit, walk_repo, &oid) < 0)
            continue;
        if (git_commit_parentcount(commit) == 2) {
            git_oid *grown = realloc(pairs, (merges + 1) * 2 * sizeof *grown);
            if (grown == NULL)
                abort();
            pairs = grown;
            pairs[merges * 2] = *git_commit_parent_id(commit, 0);
            pairs[merges * 2 + 1] = *git_commit_parent_id(commit, 1);
            merges++;
        }
        git_commit_free(commit);
    }
    char head[GIT_OID_HEXSZ + 1] = "";
    if (git_reference_name_to_id(&oid, walk_repo, "HEAD") == 0)
        git_oid_tostr(head, sizeof head, &oid);
    git_revwalk_free(walk);
    git_repository_free(walk_repo);

    merge_repos_t *repos = NULL;
    if (merge_repos_new(&repos) != 0)
        return 1;
    int64_t *engine_us = calloc(merges + 1, sizeof *engine_us);
    int64_t *git_us = calloc(merges + 1, sizeof *git_us);
    size_t engine_conflicted = 0, git_conflicted = 0, verdicts_same = 0, both_conflicted = 0;
    size_t paths_same = 0, errors = 0, timed = 0, clean_both = 0, trees_same = 0;
    for (size_t m = 0; m < merges; m++) {
        const git_oid *ours = &pairs[m * 2], *theirs = &pairs[m * 2 + 1];
        char h1[GIT_OID_HEXSZ + 1], h2[GIT_OID_HEXSZ + 1];
        git_oid_tostr(h1, sizeof h1, ours);
        git_oid_tostr(h2, sizeof h2, theirs);
        path_list_t engine = {0}, git = {0};
        int64_t engine_time = 0;
        int engine_rc = s_engine_conflicts(repos, repo_path, ours, theirs, &engine, &engine_time);
        int64_t start = clock_now_us();
        int git_rc = s_git_conflicts(repo_path, h1, h2, &git);
        int64_t git_time = clock_now_us() - start;
        if (engine_rc != 0 || git_rc != 0) {
            errors++;
            fprintf(stderr, "merge %.10s + %.10s: %s failed\n", h1, h2,
                    engine_rc != 0 ? "the engine" : "git merge-tree");
        } else {
            engine_us[timed] = engine_time;
            git_us[timed++] = git_time;
            engine_conflicted += engine.n > 0;
            git_conflicted += git.n > 0;
            bool same_verdict = (engine.n > 0) == (git.n > 0);
            verdicts_same += same_verdict;
            both_conflicted += engine.n > 0 && git.n > 0;
            bool same_paths = s_lists_equal(&engine, &git);
            paths_same += engine.n > 0 && git.n > 0 && same_paths;
            if (engine.n == 0 && git.n == 0) {
                clean_both++;
                trees_same += strcmp(engine.tree, git.tree) == 0;
                if (strcmp(engine.tree, git.tree) != 0)
                    printf("tree differs %.10s + %.10s: engine %s, git %s\n", h1, h2,
                           engine.tree[0] ? engine.tree : "(not written)", git.tree);
            }
            if (!same_paths) {
                printf("%s %.10s + %.10s:", same_verdict ? "paths differ" : "verdict differs", h1,
                       h2);
                s_print_missing("engine only", &engine, &git);
                s_print_missing("; git only", &git, &engine);
                printf("\n");
            }
        }
        s_list_clear(&engine);
        s_list_clear(&git);
    }
    printf("repository %s at %.10s: %zu two-parent merges, %zu replayed on both sides "
           "(%zu errors)\n",
           repo_path, head, merges, timed, errors);
    printf("verdicts identical: %zu/%zu (conflicting: engine %zu, git %zu)\n", verdicts_same, timed,
           engine_conflicted, git_conflicted);
    printf("conflicting path sets identical: %zu/%zu merges both sides call conflicting\n",
           paths_same, both_conflicted);
    printf("merged trees identical: %zu/%zu clean merges (the engine's written outside its "
           "timing)\n",
           trees_same, clean_both);
    printf("repository opened %zu time(s) by the engine's handle set\n", merge_repos_opened(repos));
    double engine_p50 = s_report("engine (handle + merge_conflicts_find)", engine_us, timed);
    double git_p50 = s_report("git merge-tree --write-tree (posix_spawn)", git_us, timed);
    if (git_p50 > 0)
        printf("engine p50 / git p50 = %.2f\n", engine_p50 / git_p50);
    merge_repos_destroy(&repos);
    free(engine_us);
    free(git_us);
    free(pairs);
    git_libgit2_shutdown();
    return errors > 0 ? 1 : 0;
}
