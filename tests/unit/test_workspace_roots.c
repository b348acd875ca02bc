/* Unit tests for the broker's workspace roots (services/broker/workspace_roots.c):
 * - a workspace under a root is accepted, one beside it ("/root-x" for "/root") is not;
 * - relative paths and "." / ".." components are refused, with the reason;
 * - a symlink under a root that leads out of the roots is refused where it exists;
 * - roots come from CLOISTER_WORKSPACE_ROOTS over [security] workspace_roots over $HOME,
 *   "~" is $HOME, "/" allows everything, and a relative root is a configuration error. */
#include "check.h"
#include "config.h"
#include "failure.h"
#include "testenv.h"
#include "workspace_roots.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Roots from a cloister.toml text (and the environment as it is). NULL on failure. */
static workspace_roots_t *s_roots(const char *toml)
{
    config_t *config = NULL;
    if (config_parse_buffer("test.toml", toml, strlen(toml), &config) != 0) {
        fprintf(stderr, "config: %s\n", failure_message());
        return NULL;
    }
    workspace_roots_t *roots = NULL;
    int rc = workspace_roots_new(config, &roots);
    config_destroy(&config);
    return rc == 0 ? roots : NULL;
}

/* workspace_roots_check(), and whether the failure's message holds `reason`. */
static bool s_refused(const workspace_roots_t *roots, const char *workspace, const char *reason)
{
    if (workspace_roots_check(roots, workspace) == 0)
        return false;
    if (strstr(failure_message(), reason) == NULL) {
        fprintf(stderr, "refused %s for: %s\n", workspace, failure_message());
        return false;
    }
    return true;
}

static void test_under_roots(const char *dir)
{
    char toml[1200], inside[800], beside[800];
    snprintf(toml, sizeof toml, "[security]\nworkspace_roots = [\"%s/root/\", \"/srv/repos\"]\n",
             dir);
    workspace_roots_t *roots = s_roots(toml);
    CHECK(roots != NULL);
    snprintf(inside, sizeof inside, "%s/root/project", dir);
    snprintf(beside, sizeof beside, "%s/root-x/project", dir);
    CHECK_INT(workspace_roots_check(roots, inside), 0);
    CHECK_INT(workspace_roots_check(roots, "/srv/repos"), 0);
    CHECK_INT(workspace_roots_check(roots, "/srv/repos/a/b"), 0);
    CHECK(s_refused(roots, beside, "is outside the workspace roots"));
    CHECK(s_refused(roots, "/etc", "add its directory to [security] workspace_roots"));
    CHECK(s_refused(roots, "srv/repos/a", "is not an absolute path"));
    CHECK(s_refused(roots, "/srv/repos/../../etc", "has a '.' or '..' component"));
    CHECK(s_refused(roots, "/srv/repos/./a", "has a '.' or '..' component"));
    CHECK(s_refused(roots, "/srv/repos/..", "has a '.' or '..' component"));
    CHECK_INT(workspace_roots_check(roots, "/srv/repos/..hidden/a"), 0);

    /* A symlink inside a root that leads out of the roots. */
    char root[800], link[800];
    snprintf(root, sizeof root, "%s/root", dir);
    mkdir(root, 0755);
    snprintf(link, sizeof link, "%s/root/escape", dir);
    CHECK_INT(symlink("/etc", link), 0);
    CHECK(s_refused(roots, link, "leads to /etc, outside the workspace roots"));
    workspace_roots_destroy(&roots);
}

static void test_where_roots_come_from(const char *dir)
{
    setenv("HOME", dir, 1);
    unsetenv("CLOISTER_WORKSPACE_ROOTS");
    workspace_roots_t *roots = s_roots("");
    CHECK(roots != NULL);
    CHECK_STR(workspace_roots_text(roots), dir);
    workspace_roots_destroy(&roots);

    roots = s_roots("[security]\nworkspace_roots = [\"~/src\", \"/\"]\n");
    CHECK(roots != NULL);
    char expected[900];
    snprintf(expected, sizeof expected, "%s/src, /", dir);
    CHECK_STR(workspace_roots_text(roots), expected);
    CHECK_INT(workspace_roots_check(roots, "/anything/at/all"), 0);
    workspace_roots_destroy(&roots);

    roots = s_roots("[security]\nworkspace_roots = []\n");
    CHECK(roots != NULL);
    CHECK_STR(workspace_roots_text(roots), "none");
    CHECK(s_refused(roots, dir, "outside the workspace roots (none)"));
    workspace_roots_destroy(&roots);

    CHECK(s_roots("[security]\nworkspace_roots = [\"src\"]\n") == NULL);
    CHECK(strstr(failure_message(), "workspace root 'src' is not an absolute path") != NULL);

    setenv("CLOISTER_WORKSPACE_ROOTS", "/a:/b/", 1);
    roots = s_roots("[security]\nworkspace_roots = [\"/c\"]\n");
    CHECK(roots != NULL);
    CHECK_STR(workspace_roots_text(roots), "/a, /b");
    CHECK(s_refused(roots, "/c/x", "outside the workspace roots (/a, /b)"));
    workspace_roots_destroy(&roots);
}

int main(void)
{
    testenv_t *env = testenv_new("workspace-roots");
    CHECK(env != NULL);
    unsetenv("CLOISTER_WORKSPACE_ROOTS"); /* testenv_new() sets it; here it is under test */
    test_under_roots(env->dir);
    test_where_roots_come_from(env->dir);
    testenv_destroy(&env);
    return check_exit_code("test_workspace_roots");
}
