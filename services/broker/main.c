/* cloister-broker: arguments, configuration and signals; the work is in broker.c.
 *
 * Settings come from $PANOPTICON_HOME/cloister.toml ([broker]), then the environment
 * (CLOISTER_IN, CLOISTER_EVENTS, CLOISTER_CONTROL, CLOISTER_SYNC), then these flags. */
#include "broker.h"

#include "config.h"
#include "fd_reserve.h"
#include "failure.h"
#include "home.h"
#include "log.h"
#include "store.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static volatile sig_atomic_t s_stop;
static volatile sig_atomic_t s_reload;

static void s_on_signal(int sig)
{
    if (sig == SIGHUP)
        s_reload = 1;
    else
        s_stop = 1;
}

static void s_usage(FILE *out)
{
    fprintf(out,
            "usage: cloister-broker [--in EP] [--events EP] [--control EP] [--home DIR]\n"
            "                       [--db FILE] [--sync full|normal|off] [--heartbeat-ms N]\n"
            "                       [--heartbeat-misses N] [--event-retention N]\n"
            "       cloister-broker --check-store FILE   (is FILE a store this broker opens?)\n"
            "Endpoints default to cloister.toml [broker], overridden by CLOISTER_IN,\n"
            "CLOISTER_EVENTS and CLOISTER_CONTROL. State lives in $PANOPTICON_HOME\n"
            "(default ~/.panopticon).\n");
}

static int s_positive(const char *flag, const char *text, long *out)
{
    char *end = NULL;
    long value = strtol(text, &end, 10);
    if (end == text || *end != '\0' || value <= 0) {
        fprintf(stderr, "cloister-broker: %s needs a positive integer, got '%s'\n", flag, text);
        return -1;
    }
    *out = value;
    return 0;
}

/* The specialists declared in cloister.toml, as a NULL-terminated array (caller frees the
 * array, not the strings, which the config owns). */
static const char **s_configured_specialists(const config_t *config)
{
    size_t n = config_table_count(config);
    const char **names = calloc(n + 1, sizeof *names);
    size_t used = 0;
    for (size_t i = 0; names && i < n; i++) {
        const char *table = config_table_name(config, i);
        if (table && strncmp(table, "specialists.", 12) == 0 && table[12] != '\0')
            names[used++] = table + 12;
    }
    return names;
}

/* Every connection costs a file descriptor (inside libzmq, which aborts when it runs out):
 * take all the system allows us. */
static void s_raise_fd_limit(void)
{
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == limit.rlim_max)
        return;
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0)
        log_warn("cannot raise the open-files limit to %llu: %s",
                 (unsigned long long)limit.rlim_max, strerror(errno));
}

/* Open files kept for the store, the log, ZeroMQ's own (its I/O thread, the mailbox of
 * each socket) and the listening sockets. */
#define FD_RESERVED 64
/* ZeroMQ sockets of the broker's own beside the workers' (bound, monitors, CURVE's). */
#define OWN_SOCKETS 32

/* Shares the open files the system allows between connections to the bound endpoints (at
 * most half of them, and at most [broker] max_peers) and workers (the rest; each one is a
 * ZeroMQ socket, its mailbox and its connection: two files), so that neither runs the
 * broker out of them. */
static void s_share_fds(const config_t *config, broker_config_t *settings)
{
    struct rlimit limit;
    rlim_t files = getrlimit(RLIMIT_NOFILE, &limit) == 0 ? limit.rlim_cur : 1024;
    if (files == RLIM_INFINITY || files > (1 << 20))
        files = 1 << 20;
    int64_t budget = (int64_t)files > 2 * FD_RESERVED ? (int64_t)files - FD_RESERVED : FD_RESERVED;
    int64_t peers = config_int(config, "broker", "max_peers", 4096);
    if (peers > budget / 2)
        peers = budget / 2;
    int64_t workers = (budget - peers) / 2;
    settings->max_peers = peers;
    settings->max_sockets = (int)(workers + OWN_SOCKETS);
    log_info("open files: %llu allowed; up to %lld connections to in/events/control and %lld "
             "workers",
             (unsigned long long)files, (long long)peers, (long long)workers);
}

/* The store's files made before the umask rule (home_secure) were open to others: they
 * are narrowed to 0600. New ones are made 0600 by the umask. */
static void s_private_store(const char *db_path)
{
    const char *suffixes[] = {"", "-wal", "-shm", ".reserve"};
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s%s", db_path, suffixes[i]);
        struct stat st;
        if (stat(path, &st) == 0 && st.st_uid == getuid() && (st.st_mode & 077) != 0)
            chmod(path, 0600);
    }
}

int main(int argc, char **argv)
{
    log_init(argv[0], LOG_LEVEL_INFO);
    s_raise_fd_limit();
    if (fd_reserve_init() != 0) {
        fprintf(stderr, "cloister-broker: %s\n", failure_message());
        return 1;
    }
    enum { OPT_IN = 1, OPT_EVENTS, OPT_CONTROL, OPT_HOME, OPT_DB, OPT_SYNC, OPT_HB, OPT_MISSES,
           OPT_RETENTION, OPT_CHECK_STORE, OPT_HELP, OPT_VERSION };
    static const struct option options[] = {
        {"in", required_argument, NULL, OPT_IN},
        {"events", required_argument, NULL, OPT_EVENTS},
        {"control", required_argument, NULL, OPT_CONTROL},
        {"home", required_argument, NULL, OPT_HOME},
        {"db", required_argument, NULL, OPT_DB},
        {"sync", required_argument, NULL, OPT_SYNC},
        {"heartbeat-ms", required_argument, NULL, OPT_HB},
        {"heartbeat-misses", required_argument, NULL, OPT_MISSES},
        {"event-retention", required_argument, NULL, OPT_RETENTION},
        {"check-store", required_argument, NULL, OPT_CHECK_STORE},
        {"help", no_argument, NULL, OPT_HELP},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    const char *flag_in = NULL, *flag_events = NULL, *flag_control = NULL, *flag_db = NULL;
    const char *flag_sync = NULL;
    long heartbeat_ms = 0, misses = 0, retention = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (opt) {
        case OPT_IN: flag_in = optarg; break;
        case OPT_EVENTS: flag_events = optarg; break;
        case OPT_CONTROL: flag_control = optarg; break;
        case OPT_HOME: setenv("PANOPTICON_HOME", optarg, 1); break;
        case OPT_DB: flag_db = optarg; break;
        case OPT_SYNC: flag_sync = optarg; break;
        case OPT_HB:
            if (s_positive("--heartbeat-ms", optarg, &heartbeat_ms) != 0)
                return 2;
            break;
        case OPT_MISSES:
            if (s_positive("--heartbeat-misses", optarg, &misses) != 0)
                return 2;
            break;
        case OPT_RETENTION:
            if (s_positive("--event-retention", optarg, &retention) != 0)
                return 2;
            break;
        case OPT_CHECK_STORE:
            /* For `pan restore`: the schema knowledge stays here, in the broker's store. */
            if (store_check_file(optarg) != 0) {
                printf("%s\n", failure_message());
                return 1;
            }
            printf("ok\n");
            return 0;
        case OPT_HELP: s_usage(stdout); return 0;
        case OPT_VERSION: printf("cloister-broker %s\n", CLOISTER_VERSION); return 0;
        default: s_usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "cloister-broker: unexpected argument '%s'\n", argv[optind]);
        s_usage(stderr);
        return 2;
    }

    config_t *config = NULL;
    if (config_load(NULL, &config) != 0) {
        fprintf(stderr, "cloister-broker: %s\n", failure_message());
        return 2;
    }
    const char *sync_text = flag_sync ? flag_sync : config_string(config, "broker", "sync", "full");
    int sync = store_sync_parse(sync_text);
    if (sync < 0) {
        fprintf(stderr, "cloister-broker: --sync must be full, normal or off, not '%s'\n", sync_text);
        config_destroy(&config);
        return 2;
    }
    /* Everything it writes under the state home is this user's alone (home.h). */
    if (home_secure() != 0) {
        fprintf(stderr, "cloister-broker: %s\n", failure_message());
        config_destroy(&config);
        return 1;
    }
    char db_path[1100];
    if (flag_db == NULL)
        home_path(db_path, sizeof db_path, "broker.db");
    else
        snprintf(db_path, sizeof db_path, "%s", flag_db);
    s_private_store(db_path);

    const char **specialists = s_configured_specialists(config);
    broker_config_t settings = {
        .in_endpoint = flag_in ? flag_in : config_string(config, "broker", "in", "tcp://127.0.0.1:5560"),
        .events_endpoint = flag_events ? flag_events
                                       : config_string(config, "broker", "events", "tcp://127.0.0.1:5561"),
        .control_endpoint = flag_control ? flag_control
                                         : config_string(config, "broker", "control", "tcp://127.0.0.1:5562"),
        .db_path = db_path,
        .sync = sync,
        .heartbeat_ms = heartbeat_ms ? (int)heartbeat_ms : (int)config_int(config, "broker", "heartbeat_ms", 1000),
        .heartbeat_misses = misses ? (int)misses : (int)config_int(config, "broker", "heartbeat_misses", 3),
        .remote_heartbeat_misses = (int)config_int(config, "broker", "remote_heartbeat_misses", 10),
        .event_retention = retention ? retention : config_int(config, "broker", "event_retention", 100000),
        .retry_backoff_ms = (int)config_int(config, "broker", "retry_backoff_ms", 1000),
        .wal_limit_mb = config_int(config, "broker", "wal_limit_mb", 64),
        .min_free_mb = config_int(config, "broker", "min_free_mb", 64),
        .reserve_mb = config_int(config, "broker", "reserve_mb", 16),
        .keep_finished_days = config_int(config, "broker", "keep_finished_days", 30),
        .unread_replies_per_peer_mb = config_int(config, "broker", "unread_replies_per_peer_mb", 16),
        .unread_replies_mb = config_int(config, "broker", "unread_replies_mb", 256),
        .config = config,
        .specialists = specialists,
        .reload = &s_reload,
    };

    s_share_fds(config, &settings);

    struct sigaction action = {0};
    action.sa_handler = s_on_signal;
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGHUP, &action, NULL);
    signal(SIGPIPE, SIG_IGN);

    broker_t *broker = NULL;
    int rc = broker_new(&settings, &broker);
    if (rc != 0) {
        fprintf(stderr, "cloister-broker: %s\n", failure_message());
    } else {
        rc = broker_run(broker, &s_stop);
        broker_destroy(&broker);
    }
    free(specialists);
    config_destroy(&config);
    return rc == 0 ? 0 : 1;
}
