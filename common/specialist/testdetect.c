/* testdetect: test-command detection from a project's files (rules in testdetect.h).
 *
 * Each rule is one small function that returns true when it decided; testdetect_find()
 * tries them in order. Nothing here runs the project's code: files are only stat'ed and
 * read (up to TESTDETECT_MAX_FILE). */
#include "testdetect.h"

#include "failure.h"
#include "log.h"

#include <dirent.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const s_runner_names[] = {
    [TESTDETECT_CONFIGURED] = "configured",
    [TESTDETECT_NPM] = "npm",
    [TESTDETECT_PNPM] = "pnpm",
    [TESTDETECT_YARN] = "yarn",
    [TESTDETECT_BUN] = "bun",
    [TESTDETECT_JEST] = "jest",
    [TESTDETECT_VITEST] = "vitest",
    [TESTDETECT_PYTEST] = "pytest",
    [TESTDETECT_CARGO] = "cargo",
    [TESTDETECT_MAVEN] = "maven",
    [TESTDETECT_GRADLE] = "gradle",
    [TESTDETECT_GO] = "go",
    [TESTDETECT_CTEST] = "ctest",
    [TESTDETECT_MESON] = "meson",
    [TESTDETECT_MAKE] = "make",
};

const char *testdetect_runner_name(testdetect_runner_t runner)
{
    if ((size_t)runner >= sizeof s_runner_names / sizeof s_runner_names[0])
        return "unknown";
    return s_runner_names[runner];
}

static void s_path(char *buf, size_t size, const char *dir, const char *name)
{
    snprintf(buf, size, "%s/%s", dir, name);
}

static bool s_is_file(const char *dir, const char *name)
{
    char path[4096];
    struct stat st;
    s_path(path, sizeof path, dir, name);
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The file's contents, NUL-terminated, malloc'd (caller frees); NULL when missing,
 * unreadable or over TESTDETECT_MAX_FILE. */
static char *s_read(const char *dir, const char *name)
{
    char path[4096];
    s_path(path, sizeof path, dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *text = malloc(TESTDETECT_MAX_FILE + 1);
    size_t n = text ? fread(text, 1, TESTDETECT_MAX_FILE + 1, f) : 0;
    fclose(f);
    if (!text || n > TESTDETECT_MAX_FILE) {
        free(text);
        return NULL;
    }
    text[n] = '\0';
    return text;
}

static bool s_file_contains(const char *dir, const char *name, const char *needle)
{
    char *text = s_read(dir, name);
    bool found = text && strstr(text, needle) != NULL;
    free(text);
    return found;
}

static void s_decide(testdetect_t *out, testdetect_runner_t runner, const char *command,
                     const char *reason)
{
    out->runner = runner;
    snprintf(out->command, sizeof out->command, "%s", command);
    snprintf(out->reason, sizeof out->reason, "%s", reason);
}

/* Rule 2: package.json scripts.test, with the lockfile's package manager. */
static bool s_rule_package_json(testdetect_t *out, const char *dir)
{
    if (!s_is_file(dir, "package.json"))
        return false;
    char *text = s_read(dir, "package.json");
    if (!text) {
        snprintf(out->warning, sizeof out->warning, "package.json: unreadable or over %d bytes",
                 TESTDETECT_MAX_FILE);
        log_warn("testdetect: %s in %s", out->warning, dir);
        return false;
    }
    json_error_t err;
    json_t *root = json_loads(text, 0, &err);
    free(text);
    if (!root || !json_is_object(root)) {
        if (root)
            snprintf(out->warning, sizeof out->warning, "package.json: not a JSON object");
        else
            snprintf(out->warning, sizeof out->warning, "package.json: malformed at line %d: %s",
                     err.line, err.text);
        log_warn("testdetect: %s in %s", out->warning, dir);
        json_decref(root);
        return false;
    }
    json_t *test = json_object_get(json_object_get(root, "scripts"), "test");
    const char *script = json_is_string(test) ? json_string_value(test) : NULL;
    /* `npm init` writes a placeholder that only fails: it is not a test suite. */
    bool usable = script && script[strspn(script, " \t")] != '\0' &&
                  strstr(script, "no test specified") == NULL;
    json_decref(root);
    if (!usable)
        return false;
    if (s_is_file(dir, "pnpm-lock.yaml"))
        s_decide(out, TESTDETECT_PNPM, "pnpm test", "package.json scripts.test (pnpm-lock.yaml)");
    else if (s_is_file(dir, "yarn.lock"))
        s_decide(out, TESTDETECT_YARN, "yarn test", "package.json scripts.test (yarn.lock)");
    else if (s_is_file(dir, "bun.lock"))
        s_decide(out, TESTDETECT_BUN, "bun run test", "package.json scripts.test (bun.lock)");
    else if (s_is_file(dir, "bun.lockb"))
        s_decide(out, TESTDETECT_BUN, "bun run test", "package.json scripts.test (bun.lockb)");
    else
        s_decide(out, TESTDETECT_NPM, "npm test", "package.json scripts.test");
    return true;
}

/* The first of `names` that is a file in dir, or NULL. */
static const char *s_first_file(const char *dir, const char *const *names)
{
    for (size_t i = 0; names[i]; i++) {
        if (s_is_file(dir, names[i]))
            return names[i];
    }
    return NULL;
}

/* Rule 3: jest or vitest configuration. */
static bool s_rule_js_config(testdetect_t *out, const char *dir)
{
    static const char *const jest[] = {"jest.config.js",  "jest.config.ts",   "jest.config.mjs",
                                       "jest.config.cjs", "jest.config.json", NULL};
    static const char *const vitest[] = {"vitest.config.js",
                                         "vitest.config.ts",
                                         "vitest.config.mjs",
                                         "vitest.config.mts",
                                         "vitest.config.cjs",
                                         "vitest.config.cts",
                                         NULL};
    const char *found = s_first_file(dir, jest);
    if (found) {
        s_decide(out, TESTDETECT_JEST, "npx jest", found);
        return true;
    }
    found = s_first_file(dir, vitest);
    if (found) {
        s_decide(out, TESTDETECT_VITEST, "npx vitest run", found);
        return true;
    }
    return false;
}

static bool s_is_python_test_name(const char *name)
{
    size_t len = strlen(name);
    if (len < 4 || strcmp(name + len - 3, ".py") != 0)
        return false;
    return strncmp(name, "test_", 5) == 0 || (len > 8 && strcmp(name + len - 8, "_test.py") == 0);
}

/* The first test_*.py / *_test.py file in dir (copied into `found`), or false. */
static bool s_find_python_test(const char *dir, char *found, size_t size)
{
    DIR *d = opendir(dir);
    if (!d)
        return false;
    struct dirent *ent;
    bool hit = false;
    while (!hit && (ent = readdir(d)) != NULL) {
        if (s_is_python_test_name(ent->d_name) && s_is_file(dir, ent->d_name)) {
            snprintf(found, size, "%s", ent->d_name);
            hit = true;
        }
    }
    closedir(d);
    return hit;
}

/* Rule 4: pytest configuration or test files. */
static bool s_rule_pytest(testdetect_t *out, const char *dir)
{
    const char *reason = NULL;
    char found[512];
    char tests_dir[4096];
    char name[300];
    if (s_is_file(dir, "pytest.ini"))
        reason = "pytest.ini";
    else if (s_file_contains(dir, "pyproject.toml", "[tool.pytest"))
        reason = "pyproject.toml [tool.pytest]";
    else if (s_file_contains(dir, "setup.cfg", "[tool:pytest]"))
        reason = "setup.cfg [tool:pytest]";
    else if (s_file_contains(dir, "tox.ini", "[pytest]"))
        reason = "tox.ini [pytest]";
    else if (s_is_file(dir, "conftest.py"))
        reason = "conftest.py";
    else if (s_is_file(dir, "setup.py")) /* a Python package: pytest, as Panopticon runs it */
        reason = "setup.py";
    else if (s_find_python_test(dir, name, sizeof name)) {
        snprintf(found, sizeof found, "%s", name);
        reason = found;
    } else {
        s_path(tests_dir, sizeof tests_dir, dir, "tests");
        if (s_find_python_test(tests_dir, name, sizeof name)) {
            snprintf(found, sizeof found, "tests/%s", name);
            reason = found;
        }
    }
    if (!reason)
        return false;
    s_decide(out, TESTDETECT_PYTEST, "pytest", reason);
    return true;
}

/* True when the makefile text defines `target` (a rule line "a b target: deps"). */
static bool s_make_has_target(const char *text, const char *target)
{
    size_t tlen = strlen(target);
    const char *line = text;
    while (*line) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        const char *colon = memchr(line, ':', len);
        /* Recipes start with a tab; "x := y" and "x ::= y" are assignments. */
        if (colon && line[0] != '\t' && line[0] != '#' && colon[1] != '=' &&
            !(colon[1] == ':' && colon[2] == '=')) {
            const char *p = line;
            while (p < colon) {
                while (p < colon && (*p == ' ' || *p == '\t'))
                    p++;
                const char *word = p;
                while (p < colon && *p != ' ' && *p != '\t')
                    p++;
                if ((size_t)(p - word) == tlen && memcmp(word, target, tlen) == 0)
                    return true;
            }
        }
        line = nl ? nl + 1 : line + len;
    }
    return false;
}

/* Rule 11: a Makefile with a check or test target. */
static bool s_rule_make(testdetect_t *out, const char *dir)
{
    static const char *const makefiles[] = {"GNUmakefile", "makefile", "Makefile", NULL};
    for (size_t i = 0; makefiles[i]; i++) {
        char *text = s_read(dir, makefiles[i]);
        if (!text)
            continue;
        char reason[300];
        bool check = s_make_has_target(text, "check");
        bool test = !check && s_make_has_target(text, "test");
        free(text);
        if (check || test) {
            snprintf(reason, sizeof reason, "%s %s target", makefiles[i], check ? "check" : "test");
            s_decide(out, TESTDETECT_MAKE, check ? "make check" : "make test", reason);
            return true;
        }
    }
    return false;
}

/* Rules 5-10: one build file each. */
static bool s_rule_build_files(testdetect_t *out, const char *dir)
{
    if (s_is_file(dir, "Cargo.toml")) {
        s_decide(out, TESTDETECT_CARGO, "cargo test", "Cargo.toml");
        return true;
    }
    if (s_is_file(dir, "pom.xml")) {
        s_decide(out, TESTDETECT_MAVEN, "mvn test", "pom.xml");
        return true;
    }
    const char *gradle = s_is_file(dir, "build.gradle")       ? "build.gradle"
                         : s_is_file(dir, "build.gradle.kts") ? "build.gradle.kts"
                                                              : NULL;
    if (gradle) {
        bool wrapper = s_is_file(dir, "gradlew");
        char reason[300];
        snprintf(reason, sizeof reason, "%s%s", gradle, wrapper ? " (gradlew)" : "");
        s_decide(out, TESTDETECT_GRADLE, wrapper ? "./gradlew test" : "gradle test", reason);
        return true;
    }
    if (s_is_file(dir, "go.mod")) {
        s_decide(out, TESTDETECT_GO, "go test ./...", "go.mod");
        return true;
    }
    if (s_file_contains(dir, "CMakeLists.txt", "enable_testing") ||
        s_file_contains(dir, "CMakeLists.txt", "add_test")) {
        s_decide(out, TESTDETECT_CTEST, "ctest --test-dir build --output-on-failure",
                 "CMakeLists.txt enable_testing/add_test");
        return true;
    }
    if (s_is_file(dir, "meson.build")) {
        s_decide(out, TESTDETECT_MESON, "meson test -C build", "meson.build");
        return true;
    }
    return false;
}

int testdetect_find(testdetect_t *out, const char *dir, const char *configured)
{
    memset(out, 0, sizeof *out);
    if (configured && configured[strspn(configured, " \t")] != '\0') {
        if (strlen(configured) >= sizeof out->command)
            return failure_set(FAILURE_TOO_BIG, "configured test_command is over %zu bytes",
                               sizeof out->command - 1);
        s_decide(out, TESTDETECT_CONFIGURED, configured, "configured test_command");
        return 0;
    }
    struct stat st;
    if (!dir || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return failure_set(FAILURE_INVALID, "not a directory: %s", dir ? dir : "(null)");
    if (s_rule_package_json(out, dir) || s_rule_js_config(out, dir) || s_rule_pytest(out, dir) ||
        s_rule_build_files(out, dir) || s_rule_make(out, dir))
        return 0;
    return failure_set(FAILURE_NOT_FOUND,
                       "no test command found in %s: no test_command configured, no "
                       "package.json scripts.test, jest/vitest config, pytest files, "
                       "Cargo.toml, pom.xml, build.gradle, go.mod, CMake tests, meson.build "
                       "or Makefile check/test target%s%s",
                       dir, out->warning[0] ? "; " : "", out->warning);
}
