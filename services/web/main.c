/* cloister-web: the dashboard. Arguments, configuration, the token and signals; the
 * server is web_http.c.
 *
 * Settings: [web] port (7700), bind (127.0.0.1) and hosts (names the Host header may carry
 * besides localhost and addresses, e.g. ["dash.example.com"]) in cloister.toml, CLOISTER_WEB_PORT over
 * the port, --port / --bind over both; the broker from [broker] (CLOISTER_CONTROL, ... over it), as for pan. The token
 * every /api request must show is $PANOPTICON_HOME/web.token (made on first start, 0600);
 * the port actually listened on is written to $PANOPTICON_HOME/web.port, so `pan web url`
 * prints the address with the token. */
#include "web.h"
#include "web_figures.h"
#include "web_http.h"

#include "client.h"
#include "config.h"
#include "curve.h"
#include "failure.h"
#include "home.h"
#include "log.h"
#include "program.h"

#include <czmq.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const s_usage =
    "usage: cloister-web [--port N] [--bind ADDRESS] [--control EP] [--events EP] [--in EP]\n"
    "                    [--version]\n"
    "The dashboard: http://ADDRESS:PORT/ (pan web url prints it with its token).\n";

static volatile sig_atomic_t s_stop;

static void s_on_signal(int sig)
{
    (void)sig;
    s_stop = 1;
}

/* Reads the token from `path`, or makes one there (32 random bytes as hex, 0600). */
static int s_token(const char *path, char *token, size_t size)
{
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        bool ok = fgets(token, (int)size, f) != NULL;
        fclose(f);
        token[strcspn(token, "\r\n")] = '\0';
        if (ok && strlen(token) >= 32)
            return 0;
    }
    unsigned char random[32];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    bool got = fd >= 0 && read(fd, random, sizeof random) == (ssize_t)sizeof random;
    if (fd >= 0)
        close(fd);
    if (!got)
        return failure_set(FAILURE_IO, "cannot read random bytes for the token");
    for (size_t i = 0; i < sizeof random && 2 * i + 2 < size; i++)
        snprintf(token + 2 * i, 3, "%02x", random[i]);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || dprintf(fd, "%s\n", token) < 0) {
        if (fd >= 0)
            close(fd);
        return failure_set(FAILURE_IO, "cannot write %s: %s", path, strerror(errno));
    }
    close(fd);
    return 0;
}

static int s_write_port(const char *path, unsigned port)
{
    FILE *f = fopen(path, "w");
    if (f == NULL || fprintf(f, "%u\n", port) < 0) {
        if (f != NULL)
            fclose(f);
        return failure_set(FAILURE_IO, "cannot write %s: %s", path, strerror(errno));
    }
    fclose(f);
    return 0;
}

/* Parses --port; false when it is not 0..65535. */
static bool s_parse_port(const char *text, long *port)
{
    char *end = NULL;
    *port = strtol(text, &end, 10);
    return end != text && *end == '\0' && *port >= 0 && *port <= 65535;
}

int main(int argc, char **argv)
{
    enum { OPT_PORT = 1, OPT_BIND, OPT_CONTROL, OPT_EVENTS, OPT_IN, OPT_VERSION, OPT_HELP };
    static const struct option options[] = {
        {"port", required_argument, NULL, OPT_PORT},
        {"bind", required_argument, NULL, OPT_BIND},
        {"control", required_argument, NULL, OPT_CONTROL},
        {"events", required_argument, NULL, OPT_EVENTS},
        {"in", required_argument, NULL, OPT_IN},
        {"version", no_argument, NULL, OPT_VERSION},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    const char *port_arg = NULL, *bind = NULL;
    web_t web = {.timeout_ms = CLIENT_TIMEOUT_MS};
    int opt;
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (opt) {
        case OPT_PORT: port_arg = optarg; break;
        case OPT_BIND: bind = optarg; break;
        case OPT_CONTROL: web.control_ep = optarg; break;
        case OPT_EVENTS: web.events_ep = optarg; break;
        case OPT_IN: web.in_ep = optarg; break;
        case OPT_VERSION: printf("cloister-web %s\n", CLOISTER_VERSION); return 0;
        case OPT_HELP:
        case 'h': fputs(s_usage, stdout); return 0;
        default: fputs(s_usage, stderr); return 2;
        }
    }
    if (port_arg == NULL && getenv("CLOISTER_WEB_PORT") != NULL && getenv("CLOISTER_WEB_PORT")[0])
        port_arg = getenv("CLOISTER_WEB_PORT");
    long port = 0;
    if (optind < argc || (port_arg != NULL && !s_parse_port(port_arg, &port))) {
        fprintf(stderr, "cloister-web: %s '%s'\n%s",
                optind < argc ? "unexpected argument" : "--port must be 0..65535, not",
                optind < argc ? argv[optind] : port_arg, s_usage);
        return 2;
    }
    log_init("cloister-web", LOG_LEVEL_INFO);
    signal(SIGPIPE, SIG_IGN); /* a browser gone shows as a failed write, not a death */
    zsys_handler_set(NULL);
    /* Everything it writes under the state home is this user's alone (home.h). */
    if (home_secure() != 0) {
        fprintf(stderr, "cloister-web: %s\n", failure_message());
        return 1;
    }
    config_t *config = NULL;
    if (config_load(NULL, &config) != 0) {
        fprintf(stderr, "cloister-web: %s\n", failure_message());
        return 1;
    }
    if (port_arg == NULL)
        port = config_int(config, "web", "port", 7700);
    if (bind == NULL)
        bind = config_string(config, "web", "bind", "127.0.0.1");
    /* The names the Host header may carry besides localhost and addresses (web_http.h). */
    const char *hosts[WEB_HOSTS_MAX + 1] = {NULL};
    size_t nhosts = config_array_len(config, "web", "hosts");
    for (size_t i = 0; i < nhosts && i < WEB_HOSTS_MAX; i++)
        hosts[i] = config_array_string(config, "web", "hosts", i);
    web.hosts = hosts;
    if (web.control_ep == NULL)
        web.control_ep = config_string(config, "broker", "control", "tcp://127.0.0.1:5562");
    if (web.events_ep == NULL)
        web.events_ep = config_string(config, "broker", "events", "tcp://127.0.0.1:5561");
    if (web.in_ep == NULL)
        web.in_ep = config_string(config, "broker", "in", "tcp://127.0.0.1:5560");
    if (!program_beside(web.pan, sizeof web.pan, "pan") || access(web.pan, X_OK) != 0)
        snprintf(web.pan, sizeof web.pan, "pan");
    const char *endpoints[] = {web.control_ep, web.events_ep, web.in_ep, NULL};
    char token_path[PATH_MAX], port_path[PATH_MAX];
    int rc = curve_client_init(config, endpoints);
    if (rc == 0)
        rc = home_mkdirs(home_dir());
    if (rc == 0)
        rc = home_path(token_path, sizeof token_path, "web.token");
    if (rc == 0)
        rc = home_path(port_path, sizeof port_path, "web.port");
    if (rc == 0)
        rc = s_token(token_path, web.token, sizeof web.token);
    if (rc != 0) {
        fprintf(stderr, "cloister-web: %s\n", failure_message());
        config_destroy(&config);
        return 1;
    }
    web.figures = web_figures_start(&web);
    web_http_t *http = web_http_start(&web, bind, (uint16_t)port);
    if (http == NULL || s_write_port(port_path, web_http_port(http)) != 0) {
        fprintf(stderr, "cloister-web: %s\n", failure_message());
        web_http_stop(&http);
        web_figures_stop(&web.figures);
        config_destroy(&config);
        return 1;
    }
    log_info("dashboard on http://%s:%u/ (broker %s); pan web url prints it with its token",
             bind, (unsigned)web_http_port(http), web.control_ep);
    struct sigaction action = {.sa_handler = s_on_signal};
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);
    while (!s_stop) {
        struct timespec pause = {0, 200 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    log_info("stopping");
    web_http_stop(&http);
    web_figures_stop(&web.figures);
    config_destroy(&config);
    return 0;
}
