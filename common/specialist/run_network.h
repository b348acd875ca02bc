/* run_network: whether a repository's command -- its tests, a review check, the merge's
 * tests -- may use the network, decided for a run and said in the job's result (the policy
 * is sandbox.h's: isolated unless the target branch, or the service's settings, opted in). */
#ifndef CLOISTER_RUN_NETWORK_H
#define CLOISTER_RUN_NETWORK_H

#include "config.h"
#include "sandbox.h"
#include "specialist.h"

#include <stdbool.h>

/* What is decided for. Strings are borrowed. */
typedef struct {
    const config_t *config;   /* the service's settings */
    const sandbox_t *sandbox; /* how the command runs */
    const char *workspace;    /* the repository */
    const char *target;       /* its target branch (NULL: main) */
    const char *section;      /* the opt-in's table: "tests" or "review" */
    const char *result_key;   /* the result field saying what the command got */
    const char *what;         /* the command, for the warning ("tests", "check lint") */
} run_network_t;

/* Returns true when the command may use the network (repository_network_opt_in()). Sets
 * `result_key` in ctx's result to what the command gets ("isolated: ...", "open: <who>", or
 * "NOT ISOLATED (<why>)"), and when it cannot be isolated although nobody opted in, says
 * so in a progress line of kind "warning". */
bool run_network_decide(specialist_ctx_t *ctx, const run_network_t *run);

#endif
