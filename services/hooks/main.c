/* cloister-hooks: tells trackers and other systems that tasks ended ([hooks] in
 * cloister.toml; hooks.h). Arguments, configuration and signals; the loop is hooks.c.
 *
 * Settings: [hooks] after_review, after_test, after_merge (commands), timeout_s (30),
 * webhook (a URL), webhook_secret (or CLOISTER_WEBHOOK_SECRET), webhook_attempts (5),
 * webhook_backoff_ms (1000); the broker from [broker] (CLOISTER_CONTROL, ... over it), as
 * for pan. With nothing configured it waits for its stop signal doing nothing, so a
 * launcher may always start it. */
#include "hooks.h"
#include "webhook.h"

#include "client.h"
#include "config.h"
#include "curve.h"
#include "failure.h"
#include "home.h"
#include "log.h"

#include <czmq.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const s_usage =
    "usage: cloister-hooks [--control EP] [--events EP] [--version]\n"
    "Runs [hooks] after_review / after_test / after_merge and POSTs [hooks] webhook for\n"
    "every task that ends; each delivery is noted in the task's events.\n";

static volatile sig_atomic_t s_stop;

static void s_on_signal(int sig)
{
    (void)sig;
    s_stop = 1;
}

/* The settings from cloister.toml. Returns 0, or FAILURE_INVALID when a webhook has no
 * secret to sign with. */
static int s_settings(hooks_settings_t *settings, const config_t *config)
{
    for (int kind = 0; kind < HOOKS_COUNT; kind++)
        settings->commands[kind] = config_string(config, "hooks", hooks_kind_name(kind), NULL);
    settings->timeout_s = (int)config_int(config, "hooks", "timeout_s", HOOKS_DEFAULT_TIMEOUT_S);
    settings->webhook_url = config_string(config, "hooks", "webhook", NULL);
    settings->webhook_secret = getenv("CLOISTER_WEBHOOK_SECRET");
    if (settings->webhook_secret == NULL || settings->webhook_secret[0] == '\0')
        settings->webhook_secret = config_string(config, "hooks", "webhook_secret", NULL);
    settings->webhook_attempts =
        (int)config_int(config, "hooks", "webhook_attempts", HOOKS_DEFAULT_WEBHOOK_ATTEMPTS);
    settings->webhook_backoff_ms =
        config_int(config, "hooks", "webhook_backoff_ms", HOOKS_DEFAULT_WEBHOOK_BACKOFF_MS);
    bool webhook = settings->webhook_url != NULL && settings->webhook_url[0] != '\0';
    if (webhook && (settings->webhook_secret == NULL || settings->webhook_secret[0] == '\0'))
        return failure_set(FAILURE_INVALID,
                           "[hooks] webhook needs a secret to sign with: set [hooks] "
                           "webhook_secret or CLOISTER_WEBHOOK_SECRET");
    return 0;
}

/* True when something is configured to deliver. */
static bool s_configured(const hooks_settings_t *settings)
{
    for (int kind = 0; kind < HOOKS_COUNT; kind++)
        if (settings->commands[kind] != NULL && settings->commands[kind][0] != '\0')
            return true;
    return settings->webhook_url != NULL && settings->webhook_url[0] != '\0';
}

int main(int argc, char **argv)
{
    enum { OPT_CONTROL = 1, OPT_EVENTS, OPT_VERSION, OPT_HELP };
    static const struct option options[] = {
        {"control", required_argument, NULL, OPT_CONTROL},
        {"events", required_argument, NULL, OPT_EVENTS},
        {"version", no_argument, NULL, OPT_VERSION},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    hooks_settings_t settings = {0};
    int opt;
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (opt) {
        case OPT_CONTROL: settings.control_ep = optarg; break;
        case OPT_EVENTS: settings.events_ep = optarg; break;
        case OPT_VERSION: printf("cloister-hooks %s\n", CLOISTER_VERSION); return 0;
        case OPT_HELP:
        case 'h': fputs(s_usage, stdout); return 0;
        default: fputs(s_usage, stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "cloister-hooks: unexpected argument '%s'\n%s", argv[optind], s_usage);
        return 2;
    }
    log_init("cloister-hooks", LOG_LEVEL_INFO);
    zsys_handler_set(NULL);
    if (home_secure() != 0) {
        fprintf(stderr, "cloister-hooks: %s\n", failure_message());
        return 1;
    }
    config_t *config = NULL;
    if (config_load(NULL, &config) != 0 || s_settings(&settings, config) != 0) {
        fprintf(stderr, "cloister-hooks: %s\n", failure_message());
        config_destroy(&config);
        return 1;
    }
    if (settings.control_ep == NULL)
        settings.control_ep = config_string(config, "broker", "control", "tcp://127.0.0.1:5562");
    if (settings.events_ep == NULL)
        settings.events_ep = config_string(config, "broker", "events", "tcp://127.0.0.1:5561");
    const char *endpoints[] = {settings.control_ep, settings.events_ep, NULL};
    int rc = curve_client_init(config, endpoints);
    if (rc == 0)
        rc = webhook_init();
    if (rc != 0) {
        fprintf(stderr, "cloister-hooks: %s\n", failure_message());
        config_destroy(&config);
        return 1;
    }
    struct sigaction action = {.sa_handler = s_on_signal};
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);
    if (!s_configured(&settings)) {
        log_info("no [hooks] configured: nothing to deliver");
        sigset_t blocked, unblocked;
        sigemptyset(&blocked);
        sigaddset(&blocked, SIGTERM);
        sigaddset(&blocked, SIGINT);
        sigprocmask(SIG_BLOCK, &blocked, &unblocked);
        while (!s_stop)
            sigsuspend(&unblocked);
        sigprocmask(SIG_SETMASK, &unblocked, NULL);
    } else {
        const char *url = settings.webhook_url;
        log_info("delivering ended tasks (broker %s)%s%s", settings.control_ep,
                 url ? " to " : "", url ? url : "");
        rc = hooks_run(&settings, &s_stop);
        if (rc != 0)
            fprintf(stderr, "cloister-hooks: %s\n", failure_message());
    }
    log_info("stopping");
    config_destroy(&config);
    return rc == 0 ? 0 : 1;
}
