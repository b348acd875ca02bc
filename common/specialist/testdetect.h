/* testdetect: decides which command runs a project's tests, by looking at its files.
 *
 * The rules, first match wins (the test-agent seed's order, extended):
 *   1. the configured `test_command` (passed in by the caller)
 *   2. package.json `scripts.test` (not npm's "no test specified" placeholder), run with the
 *      package manager its lockfile names: pnpm-lock.yaml → `pnpm test`, yarn.lock →
 *      `yarn test`, bun.lock or bun.lockb → `bun run test` (not `bun test`, which is Bun's
 *      own test runner and ignores scripts.test), otherwise `npm test`
 *   3. jest.config.{js,ts,mjs,cjs,json} → `npx jest`;
 *      vitest.config.{js,ts,mjs,mts,cjs,cts} → `npx vitest run`
 *   4. pytest: pytest.ini, pyproject.toml with `[tool.pytest`, setup.cfg with
 *      `[tool:pytest]`, tox.ini with `[pytest]`, conftest.py, setup.py (with or without
 *      setup.cfg), or test_*.py / *_test.py at the top or in tests/ → `pytest`
 *   5. Cargo.toml → `cargo test`
 *   6. pom.xml → `mvn test`
 *   7. build.gradle(.kts) → `./gradlew test` when gradlew exists, else `gradle test`
 *   8. go.mod → `go test ./...`
 *   9. CMakeLists.txt with enable_testing / add_test → `ctest --test-dir build
 *      --output-on-failure` (this assumes the project was configured and built in `build/`;
 *      configure a test_command when it builds elsewhere)
 *  10. meson.build → `meson test -C build` (same assumption)
 *  11. Makefile (or makefile, GNUmakefile) with a `check` target → `make check`, else with a
 *      `test` target → `make test`
 *
 * A malformed package.json does not stop detection: it is noted in `warning` and the next
 * rule is tried. Files bigger than TESTDETECT_MAX_FILE are not read. */
#ifndef CLOISTER_TESTDETECT_H
#define CLOISTER_TESTDETECT_H

#define TESTDETECT_MAX_FILE (1024 * 1024)

typedef enum {
    TESTDETECT_CONFIGURED,
    TESTDETECT_NPM,
    TESTDETECT_PNPM,
    TESTDETECT_YARN,
    TESTDETECT_BUN,
    TESTDETECT_JEST,
    TESTDETECT_VITEST,
    TESTDETECT_PYTEST,
    TESTDETECT_CARGO,
    TESTDETECT_MAVEN,
    TESTDETECT_GRADLE,
    TESTDETECT_GO,
    TESTDETECT_CTEST,
    TESTDETECT_MESON,
    TESTDETECT_MAKE
} testdetect_runner_t;

typedef struct {
    char command[4096];         /* the shell command to run in the directory */
    testdetect_runner_t runner; /* which kind of runner it is (for output parsing) */
    char reason[512];           /* what decided, e.g. "package.json scripts.test (yarn.lock)" */
    char warning[512];          /* a problem met on the way (malformed package.json), or "" */
} testdetect_t;

/* Detects the test command for the project in `dir`. `configured` is the configured
 * test_command, or NULL/"" to detect. Fills *out (caller-owned) and returns 0;
 * FAILURE_NOT_FOUND with a reason naming what was looked for when nothing matches (out's
 * warning is still set); FAILURE_INVALID if `dir` is not a readable directory;
 * FAILURE_TOO_BIG if the configured command does not fit. */
int testdetect_find(testdetect_t *out, const char *dir, const char *configured);

/* A short lowercase name for a runner ("npm", "pytest", "configured", ...). Static. */
const char *testdetect_runner_name(testdetect_runner_t runner);

#endif
