/* pan keys: the bus's CURVE keys (see common/bus/curve.h).
 *
 *   pan keys init           the broker's pair and the default client's, authorized (the
 *                           broker also makes them on its first start with CURVE on)
 *   pan keys add NAME [--role submitter|worker|admin|agent]
 *                           a pair for another party, with what it may do (default
 *                           submitter; see curve.h): give it keys/clients/NAME_secret
 *                           and keys/broker (the broker's public key)
 *   pan keys revoke NAME    NAME may no longer connect (the broker reloads on SIGHUP) */
#include "pan.h"

#include "curve.h"
#include "failure.h"
#include "home.h"

#include <stdio.h>
#include <string.h>

static const char *const s_usage =
    "pan keys init | add NAME [--role submitter|worker|admin|agent] | revoke NAME";

/* pan keys add NAME [--role ROLE] */
static int s_add(int argc, char **argv, const char *dir)
{
    const char *name = argv[1];
    const char *role_name = "submitter";
    if (argc == 4 && strcmp(argv[2], "--role") == 0)
        role_name = argv[3];
    else if (argc != 2)
        return pan_usage(s_usage, "keys add takes NAME and optionally --role ROLE");
    int role = curve_role_parse(role_name);
    if (role < 0)
        return pan_usage(s_usage, "unknown role '%s' (submitter, worker, admin or agent)",
                         role_name);
    if (curve_keys_init() != 0 || curve_keys_add(name, (curve_role_t)role) != 0)
        return pan_fail(PAN_EXIT_ERROR, "%s", failure_message());
    printf("Authorized %s as %s: give it %s/clients/%s_secret (CLOISTER_CURVE_CERT) and "
           "%s/broker\n",
           name, role_name, dir, name, dir);
    return PAN_EXIT_OK;
}

int cmd_keys(const pan_t *pan, int argc, char **argv)
{
    (void)pan;
    if (argc < 1)
        return pan_usage(s_usage, "which keys command?");
    const char *command = argv[0];
    char dir[4096];
    home_path(dir, sizeof dir, CURVE_KEYS_DIR);
    if (strcmp(command, "init") == 0 && argc == 1) {
        if (curve_keys_init() != 0)
            return pan_fail(PAN_EXIT_ERROR, "%s", failure_message());
        printf("Keys in %s: broker, client (authorized, admin), agent (authorized, agent: "
               "what a specialist gives its agent's cloister-mcp)\n", dir);
        return PAN_EXIT_OK;
    }
    if (strcmp(command, "add") == 0 && argc >= 2)
        return s_add(argc, argv, dir);
    if (strcmp(command, "revoke") == 0 && argc == 2) {
        if (curve_keys_revoke(argv[1]) != 0)
            return pan_fail(PAN_EXIT_ERROR, "%s", failure_message());
        printf("Revoked %s (a running broker drops it at its next SIGHUP)\n", argv[1]);
        return PAN_EXIT_OK;
    }
    return pan_usage(s_usage, "unknown keys command or wrong arguments");
}
