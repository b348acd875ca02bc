/* run_network: see run_network.h. */
#include "run_network.h"

#include "repository.h"

bool run_network_decide(specialist_ctx_t *ctx, const run_network_t *run)
{
    char opted_in[300], network[1600];
    bool allowed = repository_network_opt_in(run->config, run->workspace,
                                             run->target && run->target[0] ? run->target : "main",
                                             run->section, opted_in, sizeof opted_in);
    bool isolated =
        sandbox_network(run->sandbox, allowed ? opted_in : NULL, network, sizeof network);
    specialist_result_str(ctx, run->result_key, network);
    if (!isolated && !allowed)
        specialist_progressf(ctx, "warning", "%s: network %s", run->what, network);
    return allowed;
}
