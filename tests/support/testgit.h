/* testgit: fixture git repositories for integration tests, made with the git CLI.
 *
 * testgit_env() pins what git sees (a private HOME, no system config, a fixed author and
 * committer), so commits are made the same way on every machine; the processes under
 * test inherit it. testgit_fixture() builds the usual trio in a directory: a bare "remote"
 * whose main holds a.c, b.c and c.txt, the user's clone on main, and a second clone ("dev")
 * that plays other people pushing. testgit_run() runs any other git command and keeps its
 * stdout for testgit_out().
 *
 * testgit_run() returns git's exit code for the caller to judge; the fixture helpers
 * (testgit_commit, testgit_fixture, testgit_push_*) stop the test with a failed check when
 * one of their steps fails: a fixture that was not made must never let a test that expects
 * a refusal pass. Not thread-safe: the output is one static buffer. */
#ifndef CLOISTER_TESTGIT_H
#define CLOISTER_TESTGIT_H

#define TESTGIT_OUT_MAX 16384

typedef struct {
    char remote[512]; /* the bare repository: <dir>/remote.git */
    char user[512];   /* the user's clone, on main: <dir>/user */
    char dev[512];    /* someone else's clone: <dir>/dev */
} testgit_fixture_t;

/* Sets HOME to `home` (created if missing), GIT_CONFIG_NOSYSTEM=1 and the author and
 * committer "Test <test@example.com>" in this process's environment. */
void testgit_env(const char *home);

/* Runs `git` with the NULL-terminated arguments in directory `dir`; stdout goes to the
 * buffer testgit_out() returns (trailing newlines and spaces removed, at most
 * TESTGIT_OUT_MAX - 1 bytes), stderr is discarded. Returns git's exit code, or -1 when it
 * could not run or was killed. */
int testgit_run(const char *dir, ...) __attribute__((sentinel));

/* The stdout of the last testgit_run() (static; valid until the next call). */
const char *testgit_out(void);

/* The commit id `rev` names in `dir` into buf (41 bytes); "" when it names none. A failed
 * check when git cannot read the repository at all. */
void testgit_rev(const char *dir, const char *rev, char *buf);

/* Writes `text` to `file` (relative to `dir`, parents created), adds and commits it with
 * message `msg`. */
void testgit_commit(const char *dir, const char *file, const char *text, const char *msg);

/* Builds the remote, the user's clone and the dev clone in `dir` (see the top); fills
 * *fixture with their paths. Call testgit_env() first. */
void testgit_fixture(testgit_fixture_t *fixture, const char *dir);

/* In `clone`: makes `branch` from main with one commit writing `file`, pushes it to
 * origin, and goes back to main. */
void testgit_push_branch(const char *clone, const char *branch, const char *file, const char *text);

/* In `clone`: pulls main, commits `file`, and pushes main to origin (someone else's
 * work landing on main). */
void testgit_push_main(const char *clone, const char *file, const char *text);

#endif
