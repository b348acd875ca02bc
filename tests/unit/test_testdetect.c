/* Unit tests for common/testdetect: each case builds a project directory and checks the
 * command, runner and reason chosen. */
#include "check.h"
#include "failure.h"
#include "testdetect.h"
#include "testenv.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static testenv_t *env;
static int project_seq;

/* Makes a fresh project directory holding the given files: pairs of (name, contents),
 * ending with NULL. Returns its path (static buffer). */
static const char *s_project(const char *first, ...)
{
    static char dir[512];
    snprintf(dir, sizeof dir, "%s/p%d", env->dir, ++project_seq);
    mkdir(dir, 0755);
    va_list ap;
    va_start(ap, first);
    for (const char *name = first; name; name = va_arg(ap, const char *)) {
        const char *text = va_arg(ap, const char *);
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        CHECK(testenv_write_file(path, text) == 0);
    }
    va_end(ap);
    return dir;
}

static void s_expect(const char *dir, const char *configured, testdetect_runner_t runner,
                     const char *command, const char *reason)
{
    testdetect_t td;
    int rc = testdetect_find(&td, dir, configured);
    CHECK_INT(rc, 0);
    if (rc != 0) {
        fprintf(stderr, "  (in %s: %s)\n", dir, failure_message());
        return;
    }
    CHECK_STR(testdetect_runner_name(td.runner), testdetect_runner_name(runner));
    CHECK_STR(td.command, command);
    if (reason)
        CHECK_STR(td.reason, reason);
}

static const char *pkg = "{\"name\":\"x\",\"scripts\":{\"test\":\"jest --ci\"}}";

static void test_each_runner(void)
{
    s_expect(s_project("package.json", pkg, NULL), NULL, TESTDETECT_NPM, "npm test",
             "package.json scripts.test");
    s_expect(s_project("jest.config.ts", "export default {}\n", NULL), NULL, TESTDETECT_JEST,
             "npx jest", "jest.config.ts");
    s_expect(s_project("jest.config.json", "{}\n", NULL), NULL, TESTDETECT_JEST, "npx jest", NULL);
    s_expect(s_project("vitest.config.mts", "export default {}\n", NULL), NULL, TESTDETECT_VITEST,
             "npx vitest run", "vitest.config.mts");
    s_expect(s_project("pytest.ini", "[pytest]\n", NULL), NULL, TESTDETECT_PYTEST, "pytest",
             "pytest.ini");
    s_expect(s_project("pyproject.toml", "[project]\nname='x'\n[tool.pytest.ini_options]\n", NULL),
             NULL, TESTDETECT_PYTEST, "pytest", "pyproject.toml [tool.pytest]");
    s_expect(s_project("setup.cfg", "[metadata]\n[tool:pytest]\naddopts=-q\n", NULL), NULL,
             TESTDETECT_PYTEST, "pytest", "setup.cfg [tool:pytest]");
    s_expect(s_project("tox.ini", "[tox]\n[pytest]\n", NULL), NULL, TESTDETECT_PYTEST, "pytest",
             "tox.ini [pytest]");
    s_expect(s_project("conftest.py", "\n", NULL), NULL, TESTDETECT_PYTEST, "pytest",
             "conftest.py");
    s_expect(s_project("setup.py", "from setuptools import setup\nsetup()\n", NULL), NULL,
             TESTDETECT_PYTEST, "pytest", "setup.py");
    s_expect(s_project("setup.py", "\n", "setup.cfg", "[metadata]\nname = x\n", NULL), NULL,
             TESTDETECT_PYTEST, "pytest", "setup.py");
    s_expect(s_project("test_app.py", "def test_a(): pass\n", NULL), NULL, TESTDETECT_PYTEST,
             "pytest", "test_app.py");
    s_expect(s_project("tests/app_test.py", "def test_a(): pass\n", NULL), NULL, TESTDETECT_PYTEST,
             "pytest", "tests/app_test.py");
    s_expect(s_project("Cargo.toml", "[package]\n", NULL), NULL, TESTDETECT_CARGO, "cargo test",
             "Cargo.toml");
    s_expect(s_project("pom.xml", "<project/>\n", NULL), NULL, TESTDETECT_MAVEN, "mvn test",
             "pom.xml");
    s_expect(s_project("build.gradle", "\n", NULL), NULL, TESTDETECT_GRADLE, "gradle test",
             "build.gradle");
    s_expect(s_project("build.gradle.kts", "\n", "gradlew", "#!/bin/sh\n", NULL), NULL,
             TESTDETECT_GRADLE, "./gradlew test", "build.gradle.kts (gradlew)");
    s_expect(s_project("go.mod", "module x\n", NULL), NULL, TESTDETECT_GO, "go test ./...",
             "go.mod");
    s_expect(s_project("CMakeLists.txt", "project(x C)\nenable_testing()\n", NULL), NULL,
             TESTDETECT_CTEST, "ctest --test-dir build --output-on-failure", NULL);
    s_expect(s_project("CMakeLists.txt", "project(x C)\nadd_test(NAME a COMMAND a)\n", NULL), NULL,
             TESTDETECT_CTEST, "ctest --test-dir build --output-on-failure", NULL);
    s_expect(s_project("meson.build", "project('x', 'c')\n", NULL), NULL, TESTDETECT_MESON,
             "meson test -C build", "meson.build");
    s_expect(s_project("Makefile", "all:\n\tcc x.c\ntest: all\n\t./x\n", NULL), NULL,
             TESTDETECT_MAKE, "make test", "Makefile test target");
    s_expect(
        s_project("Makefile", ".PHONY: all check\nall:\n\tcc x.c\nunit check: all\n\t./x\n", NULL),
        NULL, TESTDETECT_MAKE, "make check", "Makefile check target");
    s_expect(s_project("GNUmakefile", "check:\n\ttrue\n", NULL), NULL, TESTDETECT_MAKE,
             "make check", NULL);
}

static void test_lockfiles(void)
{
    s_expect(s_project("package.json", pkg, "pnpm-lock.yaml", "lockfileVersion: 6\n", NULL), NULL,
             TESTDETECT_PNPM, "pnpm test", "package.json scripts.test (pnpm-lock.yaml)");
    s_expect(s_project("package.json", pkg, "yarn.lock", "# yarn\n", NULL), NULL, TESTDETECT_YARN,
             "yarn test", "package.json scripts.test (yarn.lock)");
    /* `bun test` would be Bun's own runner, which ignores scripts.test. */
    s_expect(s_project("package.json", pkg, "bun.lockb", "bin", NULL), NULL, TESTDETECT_BUN,
             "bun run test", "package.json scripts.test (bun.lockb)");
    /* bun.lock: the text lockfile of Bun 1.2 and later. */
    s_expect(s_project("package.json", pkg, "bun.lock", "{\"lockfileVersion\": 1}\n", NULL),
             NULL, TESTDETECT_BUN, "bun run test", "package.json scripts.test (bun.lock)");
    s_expect(s_project("package.json", pkg, "package-lock.json", "{}", NULL), NULL, TESTDETECT_NPM,
             "npm test", NULL);
}

static void test_priority(void)
{
    /* Everything at once: package.json wins. */
    const char *all =
        s_project("package.json", pkg, "jest.config.js", "", "pytest.ini", "", "Cargo.toml", "",
                  "pom.xml", "", "go.mod", "", "Makefile", "check:\n\ttrue\n", NULL);
    s_expect(all, NULL, TESTDETECT_NPM, "npm test", NULL);
    /* The configured command beats all of them. */
    s_expect(all, "make -C sub verify", TESTDETECT_CONFIGURED, "make -C sub verify",
             "configured test_command");
    /* An empty configured command means "detect". */
    s_expect(all, "  ", TESTDETECT_NPM, "npm test", NULL);
    s_expect(s_project("jest.config.js", "", "vitest.config.ts", "", "pytest.ini", "", NULL), NULL,
             TESTDETECT_JEST, "npx jest", NULL);
    s_expect(s_project("vitest.config.ts", "", "conftest.py", "", NULL), NULL, TESTDETECT_VITEST,
             "npx vitest run", NULL);
    s_expect(s_project("conftest.py", "", "Cargo.toml", "", NULL), NULL, TESTDETECT_PYTEST,
             "pytest", NULL);
    s_expect(s_project("Cargo.toml", "", "pom.xml", "", NULL), NULL, TESTDETECT_CARGO, "cargo test",
             NULL);
    s_expect(s_project("pom.xml", "", "build.gradle", "", NULL), NULL, TESTDETECT_MAVEN, "mvn test",
             NULL);
    s_expect(s_project("build.gradle", "", "go.mod", "", NULL), NULL, TESTDETECT_GRADLE,
             "gradle test", NULL);
    s_expect(s_project("go.mod", "", "CMakeLists.txt", "enable_testing()\n", NULL), NULL,
             TESTDETECT_GO, "go test ./...", NULL);
    s_expect(s_project("CMakeLists.txt", "enable_testing()\n", "meson.build", "", NULL), NULL,
             TESTDETECT_CTEST, "ctest --test-dir build --output-on-failure", NULL);
    s_expect(s_project("meson.build", "", "Makefile", "check:\n", NULL), NULL, TESTDETECT_MESON,
             "meson test -C build", NULL);
    /* check beats test in a Makefile. */
    s_expect(s_project("Makefile", "test:\n\ttrue\ncheck:\n\ttrue\n", NULL), NULL, TESTDETECT_MAKE,
             "make check", NULL);
    /* A pyproject.toml without pytest settings does not select pytest. */
    s_expect(s_project("pyproject.toml", "[project]\nname='x'\n", "go.mod", "", NULL), NULL,
             TESTDETECT_GO, "go test ./...", NULL);
    /* CMake without tests falls through to the Makefile. */
    s_expect(s_project("CMakeLists.txt", "project(x C)\n", "Makefile", "test:\n", NULL), NULL,
             TESTDETECT_MAKE, "make test", NULL);
}

static void test_package_json_edge_cases(void)
{
    testdetect_t td;
    /* npm's placeholder is not a test suite: the next rule decides. */
    const char *placeholder =
        "{\"scripts\":{\"test\":\"echo \\\"Error: no test specified\\\" && exit 1\"}}";
    const char *dir = s_project("package.json", placeholder, "vitest.config.js", "", NULL);
    s_expect(dir, NULL, TESTDETECT_VITEST, "npx vitest run", NULL);
    dir = s_project("package.json", placeholder, NULL);
    CHECK_INT(testdetect_find(&td, dir, NULL), FAILURE_NOT_FOUND);

    /* No scripts.test, a non-string one, an empty one. */
    s_expect(
        s_project("package.json", "{\"scripts\":{\"build\":\"tsc\"}}", "jest.config.js", "", NULL),
        NULL, TESTDETECT_JEST, "npx jest", NULL);
    s_expect(s_project("package.json", "{\"scripts\":{\"test\":42}}", "go.mod", "", NULL), NULL,
             TESTDETECT_GO, "go test ./...", NULL);
    s_expect(s_project("package.json", "{\"scripts\":{\"test\":\"  \"}}", "go.mod", "", NULL), NULL,
             TESTDETECT_GO, "go test ./...", NULL);

    /* Malformed: reported in warning, detection goes on. */
    dir =
        s_project("package.json", "{\"scripts\": {\"test\": \"jest\",,}\n", "Cargo.toml", "", NULL);
    CHECK_INT(testdetect_find(&td, dir, NULL), 0);
    CHECK_STR(td.command, "cargo test");
    CHECK(strstr(td.warning, "package.json: malformed at line 1") != NULL);

    dir = s_project("package.json", "[1, 2]", NULL);
    CHECK_INT(testdetect_find(&td, dir, NULL), FAILURE_NOT_FOUND);
    CHECK_STR(td.warning, "package.json: not a JSON object");
    CHECK(strstr(failure_message(), "package.json: not a JSON object") != NULL);

    /* A clean detection has no warning. */
    CHECK_INT(testdetect_find(&td, s_project("package.json", pkg, NULL), NULL), 0);
    CHECK_STR(td.warning, "");
}

static void test_not_found(void)
{
    testdetect_t td;
    const char *dir = s_project("README.md", "# x\n", "Makefile", "all:\n\tcc x.c\n",
                                "tests/helper.py", "\n", NULL);
    CHECK_INT(testdetect_find(&td, dir, NULL), FAILURE_NOT_FOUND);
    CHECK(strstr(failure_message(), "no test command found in") != NULL);
    /* "tests:" as an assignment-like or recipe line is not a target. */
    dir = s_project("Makefile", "test := foo\n\techo test: x\n", NULL);
    CHECK_INT(testdetect_find(&td, dir, NULL), FAILURE_NOT_FOUND);
    CHECK_INT(testdetect_find(&td, "/nonexistent/dir", NULL), FAILURE_INVALID);
    CHECK_INT(testdetect_find(&td, NULL, NULL), FAILURE_INVALID);
    /* A configured command needs no directory checks at all. */
    CHECK_INT(testdetect_find(&td, "/nonexistent/dir", "true"), 0);
    CHECK_STR(testdetect_runner_name(TESTDETECT_MAKE), "make");
    CHECK_STR(testdetect_runner_name((testdetect_runner_t)99), "unknown");
}

int main(void)
{
    env = testenv_new("testdetect");
    if (!env)
        return 1;
    test_each_runner();
    test_lockfiles();
    test_priority();
    test_package_json_edge_cases();
    test_not_found();
    testenv_destroy(&env);
    return check_exit_code("test_testdetect");
}
