/* cloister-mcp: a stdio MCP server that gives a coding agent Cloister's tools (see
 * mcp_tools.h for the tools, mcp_server.h for the protocol).
 *
 *   claude mcp add cloister -- cloister-mcp
 *
 * The broker's endpoints come from the flags, else CLOISTER_CONTROL / CLOISTER_EVENTS /
 * CLOISTER_IN, else [broker] in $PANOPTICON_HOME/cloister.toml, as for pan. Inside a
 * Cloister task the specialist starts it with --task and --handoff-file (or the variables
 * CLOISTER_TASK_ID and CLOISTER_HANDOFF_FILE), so handoff_to chains from that task, with
 * --root for each of the task's own directories (apply_patch writes nowhere else), and
 * with the agent key (CLOISTER_CURVE_CERT, curve.h): what the agent asks is bounded by it.
 * stdout carries only protocol messages; logs go to stderr. */
#include "mcp_server.h"

#include "client.h"
#include "config.h"
#include "curve.h"
#include "failure.h"
#include "home.h"
#include "log.h"
#include "program.h"

#include <czmq.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const s_usage =
    "usage: cloister-mcp [--control EP] [--events EP] [--in EP] [--pan PATH]\n"
    "                    [--task ID --handoff-file PATH [--root DIR]...] [--version]\n"
    "A Model Context Protocol server on stdin/stdout (JSON-RPC, one message per line):\n"
    "  claude mcp add cloister -- cloister-mcp\n";

/* pan next to this program when it is there (an install or a build tree), else from PATH. */
static const char *s_default_pan(char *buf, size_t size)
{
    return program_beside(buf, size, "pan") && access(buf, X_OK) == 0 ? buf : "pan";
}

int main(int argc, char **argv)
{
    enum { OPT_CONTROL = 1, OPT_EVENTS, OPT_IN, OPT_PAN, OPT_TASK, OPT_HANDOFF, OPT_ROOT,
           OPT_VERSION, OPT_HELP };
    static const struct option options[] = {
        {"control", required_argument, NULL, OPT_CONTROL},
        {"events", required_argument, NULL, OPT_EVENTS},
        {"in", required_argument, NULL, OPT_IN},
        {"pan", required_argument, NULL, OPT_PAN},
        {"task", required_argument, NULL, OPT_TASK},
        {"handoff-file", required_argument, NULL, OPT_HANDOFF},
        {"root", required_argument, NULL, OPT_ROOT},
        {"version", no_argument, NULL, OPT_VERSION},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    char pan_buf[PATH_MAX];
    const char *roots[MCP_ROOTS_MAX + 1] = {NULL};
    size_t nroots = 0;
    mcp_settings_t settings = {.source = "cloister-mcp", .timeout_ms = CLIENT_TIMEOUT_MS,
                               .parent_task = getenv("CLOISTER_TASK_ID"),
                               .handoff_file = getenv("CLOISTER_HANDOFF_FILE")};
    int opt;
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (opt) {
        case OPT_CONTROL: settings.control_ep = optarg; break;
        case OPT_EVENTS: settings.events_ep = optarg; break;
        case OPT_IN: settings.in_ep = optarg; break;
        case OPT_PAN: settings.pan = optarg; break;
        case OPT_TASK: settings.parent_task = optarg; break;
        case OPT_HANDOFF: settings.handoff_file = optarg; break;
        case OPT_ROOT:
            if (nroots == MCP_ROOTS_MAX) {
                fprintf(stderr, "cloister-mcp: more than %d --root\n", MCP_ROOTS_MAX);
                return 2;
            }
            roots[nroots++] = optarg;
            break;
        case OPT_VERSION: printf("cloister-mcp %s\n", CLOISTER_VERSION); return 0;
        case OPT_HELP:
        case 'h': fputs(s_usage, stdout); return 0;
        default: fputs(s_usage, stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "cloister-mcp: unexpected argument '%s'\n%s", argv[optind], s_usage);
        return 2;
    }
    if ((settings.parent_task == NULL || settings.parent_task[0] == '\0') !=
        (settings.handoff_file == NULL || settings.handoff_file[0] == '\0')) {
        fprintf(stderr, "cloister-mcp: --task and --handoff-file go together\n");
        return 2;
    }
    if (settings.handoff_file != NULL && settings.handoff_file[0] == '\0')
        settings.handoff_file = settings.parent_task = NULL;
    /* Inside a task apply_patch writes only in the task's own directories: none given, none
     * at all (an empty list), rather than anywhere. */
    if (nroots > 0 || settings.parent_task != NULL)
        settings.roots = roots;
    log_init("cloister-mcp", LOG_LEVEL_INFO);
    signal(SIGPIPE, SIG_IGN); /* a client gone shows as a failed write, not a death */
    zsys_handler_set(NULL);

    /* Everything it writes under the state home is this user's alone (home.h). */
    if (home_secure() != 0) {
        fprintf(stderr, "cloister-mcp: %s\n", failure_message());
        return 1;
    }
    config_t *config = NULL;
    if (config_load(NULL, &config) != 0) {
        fprintf(stderr, "cloister-mcp: %s\n", failure_message());
        return 1;
    }
    if (settings.control_ep == NULL)
        settings.control_ep = config_string(config, "broker", "control", "tcp://127.0.0.1:5562");
    if (settings.events_ep == NULL)
        settings.events_ep = config_string(config, "broker", "events", "tcp://127.0.0.1:5561");
    if (settings.in_ep == NULL)
        settings.in_ep = config_string(config, "broker", "in", "tcp://127.0.0.1:5560");
    if (settings.pan == NULL)
        settings.pan = s_default_pan(pan_buf, sizeof pan_buf);
    const char *endpoints[] = {settings.control_ep, settings.events_ep, settings.in_ep, NULL};
    if (curve_client_init(config, endpoints) != 0) {
        fprintf(stderr, "cloister-mcp: %s\n", failure_message());
        config_destroy(&config);
        return 1;
    }
    log_info("serving on stdio; broker %s%s%s", settings.control_ep,
             settings.parent_task ? ", inside task " : "",
             settings.parent_task ? settings.parent_task : "");
    int rc = mcp_server_run(&settings, STDIN_FILENO, stdout);
    if (rc != 0)
        log_error("%s", failure_message());
    config_destroy(&config);
    return rc == 0 ? 0 : 1;
}
