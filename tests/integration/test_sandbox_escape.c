/* test_sandbox_escape: a branch's code, run as whoever the services run as (root here and
 * in CI), stays in its box -- through the real test-agent (`make test`) and the real
 * review-agent (a [review] check). The branch's escape.sh tries what a hostile branch did
 * to a root deployment:
 *
 *   capabilities      CapEff of the command (it had 000001fffeffffff) and NoNewPrivs
 *   remount           `mount -o remount,rw /`, then writing /etc/<probe>
 *   umount            unmounting the tmpfs over $HOME (directly, and in a user namespace
 *                     of its own) to reach ~/.ssh/id_rsa behind it
 *   secrets           ~/.ssh/id_rsa, /etc/shadow, $PANOPTICON_HOME/keys/ (its *_secret
 *                     files), the services' environment through /proc (ANTHROPIC_API_KEY),
 *                     a signal to a service
 *   sockets           connecting to Unix sockets this test listens on under /run and
 *                     /var/tmp, and to the broker's ipc socket (the bus)
 *   tmp               reading a file this test left in /tmp and /var/tmp, writing files
 *                     there for the host to see
 *   git hooks         planting a hook in the repository's git directory (the services and
 *                     the user run git there later, outside any sandbox)
 *
 * Each attack prints "ATTACK name: refused" or "ATTACK name: ESCAPED"; controls prove the
 * probes work (a socket the script listens on itself accepts, its own /tmp is writable).
 * The test checks the script's words and, from outside, that nothing arrived or appeared.
 * Where bwrap cannot run at all (the test looks for itself), it exits 77 saying so. */
#include "test_test_service_harness.h"
#include "testgit.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>

static harness_t *s_h;
static testgit_fixture_t s_repos;
/* What the test places and later looks for, named after this process. */
static char s_run_sock[108], s_vartmp_sock[108], s_tmp_file[200], s_vartmp_file[200];
static char s_probe[64];
static int s_run_fd = -1, s_vartmp_fd = -1;

static const char *const s_attacks[] = {
    "capabilities",   "no_new_privs",   "remount",    "umount-home",   "umount-home-userns",
    "ssh-key",        "shadow",         "keys",       "service-environ", "signal-service",
    "socket-run",     "socket-var-tmp", "socket-bus", "read-host-tmp", "read-host-var-tmp",
    "git-hook",       NULL};
static const char *const s_controls[] = {"own-socket", "own-tmp", "own-dir", NULL};

/* Listens on a Unix socket at path (non-blocking); -1 when this user cannot make it there
 * (said). */
static int s_listen_unix(const char *path)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    unlink(path);
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 8) != 0) {
        fprintf(stderr, "test_sandbox_escape: cannot listen on %s (%s)\n", path,
                strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    chmod(path, 0777);
    return fd;
}

/* How many connections arrived at fd since the last call. */
static int s_accepted(int fd)
{
    int count = 0;
    int conn;
    while (fd >= 0 && (conn = accept(fd, NULL, NULL)) >= 0) {
        close(conn);
        count++;
    }
    return count;
}

static bool s_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* The escape script; `tester` is the test-agent's pid (its environment holds the marker
 * key). */
static void s_script(char *buf, size_t size, pid_t tester)
{
    snprintf(
        buf, size,
        "#!/bin/sh\n"
        "# A hostile branch: every attack must be refused.\n"
        "try() { name=$1; shift; if \"$@\" >/dev/null 2>&1; then echo \"ATTACK $name: "
        "ESCAPED\"; else echo \"ATTACK $name: refused\"; fi; }\n"
        "control() { name=$1; shift; if \"$@\" >/dev/null 2>&1; then echo \"CONTROL $name: "
        "ok\"; else echo \"CONTROL $name: BROKEN\"; fi; }\n"
        "connect() { perl -MSocket -e 'socket(S, PF_UNIX, SOCK_STREAM, 0) or exit 2; "
        "connect(S, pack_sockaddr_un($ARGV[0])) or exit 1' \"$1\"; }\n"
        "echo \"uid $(id -u): $(grep -E '^(CapEff|NoNewPrivs)' /proc/self/status | tr -s "
        "'\\t\\n' '  ')\"\n"
        "try capabilities sh -c \"! grep -qE '^CapEff:[[:space:]]+0+$' /proc/self/status\"\n"
        "try no_new_privs sh -c \"! grep -qE '^NoNewPrivs:[[:space:]]+1$' /proc/self/status\"\n"
        "try remount sh -c 'mount -o remount,rw / 2>/dev/null; mount -o remount,bind,rw / "
        "2>/dev/null; echo x > /etc/%s'\n"
        "try umount-home sh -c 'cd /; for m in \"$HOME\" /tmp %s; do umount \"$m\" || "
        "umount -l \"$m\"; done; cat \"$HOME/.ssh/id_rsa\" %s/keys/*secret*'\n"
        "try umount-home-userns unshare -Urm sh -c 'cd /; for m in \"$HOME\" /tmp; do umount "
        "-l \"$m\"; done; cat \"$HOME/.ssh/id_rsa\"'\n"
        "try ssh-key cat \"$HOME/.ssh/id_rsa\"\n"
        "try shadow cat /etc/shadow\n"
        "try keys sh -c 'cat %s/keys/*secret*'\n"
        "try service-environ sh -c 'cat /proc/%d/environ || grep -l sekrit "
        "/proc/[0-9]*/environ'\n"
        "try signal-service kill -0 %d\n"
        "try socket-run connect %s\n"
        "try socket-var-tmp connect %s\n"
        "try socket-bus connect %s/in.sock\n"
        "try read-host-tmp cat %s\n"
        "try read-host-var-tmp cat %s\n"
        "echo escaped > /tmp/%s-from-sandbox; echo escaped > /var/tmp/%s-from-sandbox\n"
        "try git-hook sh -c 'echo \"echo pwned\" > \"$(git rev-parse --git-common-dir)/hooks/"
        "%s\"'\n"
        "perl -MSocket -e 'socket(S, PF_UNIX, SOCK_STREAM, 0) or die; bind(S, "
        "pack_sockaddr_un($ARGV[0])) or die; listen(S, 1); sleep 5' .own.sock &\n"
        "for i in 1 2 3 4 5 6 7 8 9 10; do [ -S .own.sock ] && break; sleep 0.2; done\n"
        "control own-socket connect .own.sock\n"
        "kill $! 2>/dev/null; rm -f .own.sock\n"
        "control own-tmp sh -c 'echo mine > /tmp/own && grep -q mine /tmp/own && echo mine > "
        "/var/tmp/own'\n"
        "control own-dir sh -c 'echo mine > own-file && grep -q mine own-file'\n"
        "echo ATTACKS-DONE\n"
        "echo '=== 1 passed in 0.01s ==='\n"
        "[ \"$1\" != fail ]\n",
        s_probe, s_h->env->home, s_h->env->home, s_h->env->home, (int)tester, (int)tester,
        s_run_sock, s_vartmp_sock, s_h->env->dir, s_tmp_file, s_vartmp_file, s_probe, s_probe,
        s_probe);
}

/* Checks the script's output: it ran to its end, every attack refused, every control
 * worked, no secret in it. */
static void s_check_output(const char *who, const char *output)
{
    if (output == NULL)
        output = "";
    bool whole = strstr(output, "ATTACKS-DONE") != NULL;
    if (!whole || strstr(output, "ESCAPED") != NULL || strstr(output, "BROKEN") != NULL ||
        strstr(output, "sekrit") != NULL)
        fprintf(stderr, "test_sandbox_escape: %s's output:\n%s\n", who, output);
    CHECK(whole);
    CHECK(strstr(output, "ESCAPED") == NULL);
    CHECK(strstr(output, "sekrit") == NULL);
    char line[120];
    for (size_t i = 0; s_attacks[i] != NULL; i++) {
        snprintf(line, sizeof line, "ATTACK %s: refused", s_attacks[i]);
        if (strstr(output, line) == NULL)
            fprintf(stderr, "test_sandbox_escape: %s: no \"%s\"\n", who, line);
        CHECK(strstr(output, line) != NULL);
    }
    for (size_t i = 0; s_controls[i] != NULL; i++) {
        snprintf(line, sizeof line, "CONTROL %s: ok", s_controls[i]);
        if (strstr(output, line) == NULL)
            fprintf(stderr, "test_sandbox_escape: %s: no \"%s\"\n", who, line);
        CHECK(strstr(output, line) != NULL);
    }
}

/* Checks from outside that nothing the script tried arrived or appeared. */
static void s_check_outside(const char *who, pid_t tester)
{
    char path[700];
    CHECK_INT(s_accepted(s_run_fd), 0);
    CHECK_INT(s_accepted(s_vartmp_fd), 0);
    snprintf(path, sizeof path, "/etc/%s", s_probe);
    CHECK(!s_exists(path));
    snprintf(path, sizeof path, "/tmp/%s-from-sandbox", s_probe);
    CHECK(!s_exists(path));
    snprintf(path, sizeof path, "/var/tmp/%s-from-sandbox", s_probe);
    CHECK(!s_exists(path));
    snprintf(path, sizeof path, "%s/.git/hooks/%s", s_repos.user, s_probe);
    if (s_exists(path))
        fprintf(stderr, "test_sandbox_escape: %s planted %s\n", who, path);
    CHECK(!s_exists(path));
    CHECK(kill(tester, 0) == 0);
}

/* The secrets the services hold and the places the machine's other programs use. */
static void s_plant(void)
{
    char path[700];
    snprintf(path, sizeof path, "%s/.ssh/id_rsa", getenv("HOME"));
    CHECK(testenv_write_file(path, "sekrit-ssh-private-key\n") == 0);
    chmod(path, 0600);
    snprintf(path, sizeof path, "%s/keys/escape_client_secret", s_h->env->home);
    CHECK(testenv_write_file(path, "sekrit-client-secret\n") == 0);
    chmod(path, 0600);
    snprintf(s_probe, sizeof s_probe, "cloister-escape-%d", (int)getpid());
    snprintf(s_run_sock, sizeof s_run_sock, "/run/%s.sock", s_probe);
    snprintf(s_vartmp_sock, sizeof s_vartmp_sock, "/var/tmp/%s.sock", s_probe);
    snprintf(s_tmp_file, sizeof s_tmp_file, "/tmp/%s-host", s_probe);
    snprintf(s_vartmp_file, sizeof s_vartmp_file, "/var/tmp/%s-host", s_probe);
    s_run_fd = s_listen_unix(s_run_sock);
    s_vartmp_fd = s_listen_unix(s_vartmp_sock);
    CHECK(s_vartmp_fd >= 0);
    if (s_run_fd < 0)
        fprintf(stderr, "test_sandbox_escape: /run is not writable by this user: the attack "
                        "on a socket there proves nothing here\n");
    CHECK(testenv_write_file(s_tmp_file, "sekrit-host-tmp\n") == 0);
    CHECK(testenv_write_file(s_vartmp_file, "sekrit-host-var-tmp\n") == 0);
}

/* What the agent CLI was asked (its prompts and arguments), from fake-claude's log:
 * where a failing check's output is quoted. Caller frees. */
static char *s_prompts(const char *log_path)
{
    char *log = testenv_read_file(log_path);
    CHECK(log != NULL);
    size_t size = strlen(log) + 1, len = 0;
    char *text = calloc(1, size);
    CHECK(text != NULL);
    for (char *line = strtok(log, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        json_t *entry = json_loads(line, 0, NULL);
        const char *in = json_string_value(json_object_get(entry, "stdin"));
        json_t *arg;
        size_t i;
        if (in != NULL && len + strlen(in) < size)
            len += (size_t)snprintf(text + len, size - len, "%s\n", in);
        json_array_foreach(json_object_get(entry, "argv"), i, arg)
        {
            const char *value = json_string_value(arg);
            if (value != NULL && len + strlen(value) < size)
                len += (size_t)snprintf(text + len, size - len, "%s\n", value);
        }
        json_decref(entry);
    }
    free(log);
    return text;
}

/* The text fenced under `label` in text (template_fence_data's form), or "" when absent.
 * Caller frees. */
static char *s_fenced(const char *text, const char *label)
{
    const char *start = strstr(text, label);
    const char *fence = start != NULL ? strchr(start, '\n') : NULL;
    if (fence == NULL)
        return strdup("");
    fence++;
    size_t ticks = strspn(fence, "`");
    const char *body = fence + ticks + 1;
    char closing[40] = "\n";
    memset(closing + 1, '`', ticks < 30 ? ticks : 30);
    const char *end = strstr(body, closing);
    return strndup(body, end != NULL ? (size_t)(end - body) : strlen(body));
}

static void s_cleanup(void)
{
    char path[700];
    const char *const made[] = {s_run_sock, s_vartmp_sock, s_tmp_file, s_vartmp_file, NULL};
    for (size_t i = 0; made[i] != NULL; i++)
        unlink(made[i]);
    snprintf(path, sizeof path, "/tmp/%s-from-sandbox", s_probe);
    unlink(path);
    snprintf(path, sizeof path, "/var/tmp/%s-from-sandbox", s_probe);
    unlink(path);
    snprintf(path, sizeof path, "/etc/%s", s_probe);
    unlink(path);
    if (s_run_fd >= 0)
        close(s_run_fd);
    if (s_vartmp_fd >= 0)
        close(s_vartmp_fd);
}

int main(void)
{
    if (!testenv_bwrap_works(false)) {
        fprintf(stderr, "test_sandbox_escape: SKIPPED: bwrap cannot run on this machine at "
                        "all, so there is no sandbox to escape (the services say NOT "
                        "ISOLATED: test_sandbox checks that)\n");
        return 77;
    }
    s_h = harness_new("sandbox-escape");
    CHECK(s_h != NULL);
    char path[700];
    snprintf(path, sizeof path, "%s/home", s_h->env->dir);
    testgit_env(path);
    testgit_fixture(&s_repos, s_h->env->dir);
    s_plant();
    /* The services hold a key in their environment: the code under test must not read it
     * from them either. */
    setenv("ANTHROPIC_API_KEY", "sekrit-api-key-of-the-service", 1);
    snprintf(path, sizeof path, "%s/claude", s_h->env->dir);
    setenv("CLAUDE_CONFIG_DIR", path, 1);
    static char s_claude_log[700];
    snprintf(s_claude_log, sizeof s_claude_log, "%s/claude.log", s_h->env->dir);
    setenv("FAKE_CLAUDE_LOG", s_claude_log, 1);
    char config[1024];
    snprintf(config, sizeof config,
             "[tests]\nsandbox = \"auto\"\n\n[agent]\ncommand = \"%s\"\n\n"
             "[review]\nchecks = [\"sh escape.sh fail\"]\n",
             testenv_bin("fake-claude"));
    tsh_config(s_h, config);
    pid_t tester = tsh_service(s_h, "t1");
    CHECK(tester > 0);
    harness_service(s_h, "cloister-review", "r1", 3000, NULL);

    /* The branch, and main with the same script (the review check runs main's config). */
    static char script[8192];
    s_script(script, sizeof script, tester);
    const char *user = s_repos.user;
    CHECK_INT(testgit_run(user, "checkout", "-q", "-B", "feature/escape", "main", NULL), 0);
    testgit_commit(user, "escape.sh", script, "a branch that tries to leave its box");
    testgit_commit(user, "Makefile", "test:\n\t@sh escape.sh\n", "make test");
    CHECK_INT(testgit_run(user, "checkout", "-q", "main", NULL), 0);
    CHECK_INT(testgit_run(user, "checkout", "-q", "feature/escape", "--", "escape.sh", NULL), 0);
    CHECK_INT(testgit_run(user, "commit", "-q", "-m", "the script on main", NULL), 0);

    tsh_submit(s_h, "escape-test", 60,
               "{\"workspace\": \"%s\", \"branch\": \"feature/escape\", \"target\": \"main\"}",
               user);
    json_t *end = tsh_end(s_h, "escape-test", 30000);
    CHECK_STR(tsh_event(end), "task.done");
    fprintf(stderr, "test_sandbox_escape: as uid %d, make test ran in: sandbox %s; network %s\n",
            (int)geteuid(), tsh_result_str(end, "sandbox"), tsh_result_str(end, "network"));
    CHECK(strncmp(tsh_result_str(end, "sandbox"), "bwrap", 5) == 0);
    s_check_output("make test (test-agent)", tsh_result_str(end, "output_tail"));
    s_check_outside("make test (test-agent)", tester);

    char payload[1024];
    snprintf(payload, sizeof payload,
             "{\"workspace\": \"%s\", \"branch\": \"feature/escape\", \"target\": \"main\"}",
             user);
    harness_submit(s_h, "escape-review", "review-agent", NULL, 60, 1, payload);
    end = tsh_end(s_h, "escape-review", 30000);
    CHECK(end != NULL);
    /* A failing check's output goes to the reviewer in its prompt, fenced as data. */
    char *prompts = s_prompts(s_claude_log);
    char *detail = s_fenced(prompts, "output of the check `sh escape.sh fail`");
    free(prompts);
    s_check_output("the review check (review-agent)", detail);
    s_check_outside("the review check (review-agent)", tester);
    free(detail);

    s_cleanup();
    harness_destroy(&s_h);
    return check_exit_code("test_sandbox_escape");
}
