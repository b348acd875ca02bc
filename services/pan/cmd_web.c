/* pan web url: the dashboard's address with its token (see services/web).
 *
 * cloister-web writes the port it listens on to $PANOPTICON_HOME/web.port and keeps its
 * token in $PANOPTICON_HOME/web.token; the token rides in the address's fragment
 * (#token=...), which the browser never sends to a server: the page reads it, exchanges it
 * once for the dashboard's HttpOnly session cookie and takes it out of the address. */
#include "pan.h"

#include "config.h"
#include "home.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static const char *const s_usage = "pan web url";

/* The first line of $PANOPTICON_HOME/<name> into buf; false when there is none. */
static bool s_read_line(const char *name, char *buf, size_t size)
{
    char path[PATH_MAX];
    if (home_path(path, sizeof path, name) != 0)
        return false;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    bool ok = fgets(buf, (int)size, f) != NULL;
    fclose(f);
    buf[strcspn(buf, "\r\n")] = '\0';
    return ok && buf[0] != '\0';
}

int cmd_web(const pan_t *pan, int argc, char **argv)
{
    if (argc != 1 || strcmp(argv[0], "url") != 0)
        return pan_usage(s_usage, argc ? "unknown web command '%s'" : "which web command?",
                         argc ? argv[0] : "");
    char port[16], token[128];
    if (!s_read_line("web.token", token, sizeof token))
        return pan_fail(PAN_EXIT_ERROR, "no dashboard token in %s yet: start cloister-web "
                                        "(deploy/run-local.sh starts it)",
                        home_dir());
    if (!s_read_line("web.port", port, sizeof port))
        snprintf(port, sizeof port, "%lld",
                 (long long)config_int(pan->config, "web", "port", 7700));
    const char *bind = config_string(pan->config, "web", "bind", "127.0.0.1");
    /* Listening on every address: this machine reaches it on loopback. */
    if (strcmp(bind, "0.0.0.0") == 0)
        bind = "127.0.0.1";
    printf("http://%s:%s/#token=%s\n", bind, port, token);
    return PAN_EXIT_OK;
}
