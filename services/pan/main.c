/* pan: the Cloister command line -- submit tasks, look at the queues and the
 * specialists, follow events. main() takes the global options (endpoints, deadline),
 * loads the configuration and hands the rest to one command module. */
#include "pan.h"

#include "curve.h"

#include "cmd_prompt.h"
#include "failure.h"
#include "home.h"
#include "repo_files.h"
#include "repository.h"

#include <czmq.h>
#include <stdio.h>
#include <string.h>

static const char *const s_usage =
    "pan [--control EP] [--events EP] [--in EP] [--timeout-ms N] <command> ...\n"
    "pan --version\n"
    "\n"
    "commands:\n"
    "  submit <specialist> [--priority P] [--issue ID] [--pr-url URL] [--workspace DIR]\n"
    "         [--branch B] [--target T] [--title TEXT] [--id ID] [--group G] [--source S]\n"
    "         [--max-attempts N] [--timeout S] [--description TEXT] [--payload JSON] [--force]\n"
    "         [--wait [--wait-timeout S] [--chain]] [--json]\n"
    "  specialists list [--json]\n"
    "  specialists queue <name> [--json]\n"
    "  specialists wake <name> [--task TEXT] [--priority P] [--workspace DIR] [--branch B]\n"
    "  specialists reset <name>|--all [--force]\n"
    "  specialists alive <worker-id>\n"
    "  events [--since SEQ] [--follow] [--topic PREFIX] [--task ID] [--issue I]\n"
    "         [--specialist S] [--limit N] [--json] [-v]   (from now on; --since 0 replays)\n"
    "  task list [--state S] [--specialist S] [--issue I] [--since DURATION] [--limit N]\n"
    "            [--before ID] [--json]   (newest first; S: queued running done failed dead\n"
    "            cancelled; DURATION: 90s 15m 2h 7d)\n"
    "  task show <id> [--json]\n"
    "  task wait <id>... [--timeout S] [--chain] [--json]   (exit: the verdict's, below)\n"
    "  cancel <id>\n"
    "  retry <id> | --all-dead [--specialist S] [--issue I] [--json]\n"
    "  priority <id> urgent|high|normal|low   (a queued task)\n"
    "  dead [--specialist S] [--issue I] [--since DURATION] [--limit N] [--json]\n"
    "  status [--json] | status --watch [--interval S] [--frames N]\n"
    "  reload [--json]        read cloister.toml again (the broker and the launched services)\n"
    "  top [--interval S] [--frames N]   (live: specialists, queues, running, failures)\n"
    "  tests detect [DIR] [--json]\n"
    "  tests sandbox [--dir DIR] [--network] [--timeout S] -- COMMAND...   (as code under\n"
    "        test runs: what it sees here)\n"
    "  merge-queue [REPO] [--json] | merge-queue pause|resume REPO TARGET\n"
    "  approve <issue-or-review-task> [--force] [--priority P] [--json]\n"
    "  prompt <specialist> <task-id> [--prompts-dir DIR] [--reviewer NAME]\n"
    "  doctor [--workspace DIR]... [--json]\n"
    "  keys init | add NAME | revoke NAME\n"
    "  web url                           (the dashboard's address with its token)\n"
    "  backup FILE [--db DB]             (a consistent copy of the broker's database, live)\n"
    "  restore FILE [--db DB]            (the broker stopped: DB replaced by FILE)\n"
    "\n"
    "Endpoints come from the flags, else CLOISTER_CONTROL / CLOISTER_EVENTS / CLOISTER_IN,\n"
    "else [broker] in $PANOPTICON_HOME/cloister.toml, else tcp://127.0.0.1:5562/5561/5560.\n"
    "Exit codes: 0 ok, 1 refused or failed, 2 usage, 3 the broker did not answer; waits\n"
    "(submit --wait, task wait) exit with the verdict: 0 passed / gate open / merged,\n"
    "1 task failed or dead, 4 timeout, 5 tests failed, 6 gate blocked, 7 merge failed.\n"
    "A task <id> may be any unique start of one. `pan <command> --help` explains every\n"
    "option of a command.\n";

/* Removes the global options from argv (wherever they are) into *pan. Returns the new
 * argc, or -1 after printing a usage error. */
static int s_take_global_options(pan_t *pan, int argc, char **argv)
{
    static const char *const usage =
        "pan [--control EP] [--events EP] [--in EP] [--timeout-ms N] <command> ...";
    int kept = 0;
    for (int i = 0; i < argc; i++) {
        const char *name = argv[i];
        const char *value = NULL;
        int found = pan_option(argc, argv, &i, "--control", &value);
        const char **target = &pan->control_ep;
        if (found == 0) {
            found = pan_option(argc, argv, &i, "--events", &value);
            target = &pan->events_ep;
        }
        if (found == 0) {
            found = pan_option(argc, argv, &i, "--in", &value);
            target = &pan->in_ep;
        }
        if (found == 0) {
            found = pan_option(argc, argv, &i, "--timeout-ms", &value);
            target = NULL;
        }
        if (found < 0) {
            pan_usage(usage, "%s needs a value", name);
            return -1;
        }
        if (found == 0) {
            argv[kept++] = argv[i];
        } else if (target != NULL) {
            *target = value;
        } else {
            int64_t ms = 0;
            if (!pan_parse_int(value, 1, 3600 * 1000, &ms)) {
                pan_usage(usage, "--timeout-ms takes milliseconds, not '%s'", value);
                return -1;
            }
            pan->timeout_ms = (int)ms;
        }
    }
    return kept;
}

int main(int argc, char **argv)
{
    /* pan handles SIGINT/SIGTERM itself (pan events --follow). */
    zsys_handler_set(NULL);
    /* pan prompt shows what the services would say: the target branch's roles. */
    repo_files_set_reader(repository_file_at);
    pan_t pan = {.timeout_ms = CLIENT_TIMEOUT_MS};
    argc = s_take_global_options(&pan, argc - 1, argv + 1);
    argv += 1;
    if (argc < 0)
        return PAN_EXIT_USAGE;
    if (argc == 0) {
        fputs(s_usage, stderr);
        return PAN_EXIT_USAGE;
    }
    const char *command = argv[0];
    if (strcmp(command, "--version") == 0 || strcmp(command, "version") == 0) {
        printf("pan %s\n", CLOISTER_VERSION);
        return PAN_EXIT_OK;
    }
    if (strcmp(command, "help") == 0 || strcmp(command, "--help") == 0 ||
        strcmp(command, "-h") == 0) {
        if (argc > 1 && pan_help(argv[1]))
            return PAN_EXIT_OK;
        fputs(s_usage, stdout);
        return PAN_EXIT_OK;
    }
    for (int i = 1; i < argc; i++) {
        if ((strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) && pan_help(command))
            return PAN_EXIT_OK;
    }
    config_t *config = NULL;
    char config_error[1024] = "";
    /* Everything it writes under the state home is this user's alone (home.h). */
    if (home_secure() != 0)
        return pan_fail(PAN_EXIT_ERROR, "%s", failure_message());
    if (config_load(NULL, &config) != 0) {
        if (strcmp(command, "reload") == 0)
            return pan_fail(PAN_EXIT_ERROR,
                            "cloister.toml not reloaded, nothing changed (the broker and the "
                            "services keep their settings): %s",
                            failure_message());
        if (strcmp(command, "doctor") != 0)
            return pan_fail(PAN_EXIT_ERROR, "%s", failure_message());
        /* The doctor reports a broken configuration and checks the rest on the defaults. */
        snprintf(config_error, sizeof config_error, "%s", failure_message());
        if (config_parse_buffer("defaults", "", 0, &config) != 0)
            return pan_fail(PAN_EXIT_ERROR, "%s", failure_message());
    }
    pan.config = config;
    if (pan.control_ep == NULL)
        pan.control_ep = config_string(config, "broker", "control", "tcp://127.0.0.1:5562");
    if (pan.events_ep == NULL)
        pan.events_ep = config_string(config, "broker", "events", "tcp://127.0.0.1:5561");
    if (pan.in_ep == NULL)
        pan.in_ep = config_string(config, "broker", "in", "tcp://127.0.0.1:5560");
    /* The bus's keys (common/bus/curve.h); `pan keys` makes them, and the doctor reports.
     * `pan tests` works on this machine only: no broker, no keys. */
    const char *endpoints[] = {pan.control_ep, pan.events_ep, pan.in_ep, NULL};
    char keys_error[1024] = "";
    if (strcmp(command, "doctor") == 0) {
        /* The doctor talks to the broker like every other command (with the keys when
         * CURVE is on), and reports keys it cannot load instead of stopping there. */
        if (curve_client_init(config, endpoints) != 0)
            snprintf(keys_error, sizeof keys_error, "%s", failure_message());
    } else if (strcmp(command, "keys") != 0 && strcmp(command, "web") != 0 &&
               strcmp(command, "backup") != 0 && strcmp(command, "restore") != 0 &&
               strcmp(command, "tests") != 0 && strcmp(command, "merge-queue") != 0 &&
               curve_client_init(config, endpoints) != 0) {
        config_destroy(&config);
        return pan_fail(PAN_EXIT_ERROR, "%s", failure_message());
    }

    int code;
    if (strcmp(command, "submit") == 0)
        code = cmd_submit(&pan, argc - 1, argv + 1);
    else if (strcmp(command, "specialists") == 0)
        code = cmd_specialists(&pan, argc - 1, argv + 1);
    else if (strcmp(command, "events") == 0)
        code = cmd_events(&pan, argc - 1, argv + 1);
    else if (strcmp(command, "task") == 0)
        code = cmd_task(&pan, argc - 1, argv + 1);
    else if (strcmp(command, "cancel") == 0)
        code = cmd_cancel(&pan, argc - 1, argv + 1);
    else if (strcmp(command, "dead") == 0)
        code = cmd_dead(&pan, argc - 1, argv + 1);
    else if (strcmp(command, "retry") == 0)
        code = cmd_retry(&pan, argc - 1, argv + 1);
    else if (strcmp(command, "priority") == 0)
        code = cmd_priority(&pan, argc - 1, argv + 1);
    else if (strcmp(command, "top") == 0)
        code = cmd_top(&pan, argc - 1, argv + 1);
    else if (strcmp(command, "status") == 0)
        code = cmd_status(&pan, argc - 1, argv + 1);
    else if (strcmp(command, "reload") == 0)
        code = cmd_reload(&pan, argc - 1, argv + 1);
    else if (strcmp(command, "tests") == 0)
        code = cmd_tests(&pan, argc - 1, argv + 1);
    else if (strcmp(command, "merge-queue") == 0)
        code = cmd_merge_queue(&pan, argc - 1, argv + 1);
    else if (strcmp(command, "approve") == 0)
        code = cmd_approve(&pan, argc - 1, argv + 1);
    else if (strcmp(command, "prompt") == 0)
        code = cmd_prompt(&pan, argc - 1, argv + 1);
    else if (strcmp(command, "keys") == 0)
        code = cmd_keys(&pan, argc - 1, argv + 1);
    else if (strcmp(command, "web") == 0)
        code = cmd_web(&pan, argc - 1, argv + 1);
    else if (strcmp(command, "backup") == 0)
        code = cmd_backup(&pan, argc - 1, argv + 1);
    else if (strcmp(command, "restore") == 0)
        code = cmd_restore(&pan, argc - 1, argv + 1);
    else if (strcmp(command, "doctor") == 0)
        code = cmd_doctor(&pan, argc - 1, argv + 1, config_error[0] ? config_error : NULL,
                          keys_error[0] ? keys_error : NULL);
    else {
        static const char *const commands[] = {
            "submit",  "specialists", "events", "task",    "cancel", "dead",
            "retry",   "priority",    "top",    "status",  "reload", "tests",
            "approve", "prompt",      "keys",   "web",     "backup", "restore",
            "doctor",  "help",        "version", "merge-queue", NULL};
        const char *near = pan_suggest(command, commands);
        if (near != NULL)
            fprintf(stderr, "pan: unknown command '%s'; did you mean '%s'?\n\n%s", command, near,
                    s_usage);
        else
            fprintf(stderr, "pan: unknown command '%s'\n\n%s", command, s_usage);
        code = PAN_EXIT_USAGE;
    }
    config_destroy(&config);
    return code;
}
