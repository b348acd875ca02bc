/* worker_job: one task of the generic specialist (cloister-worker, see main.c for the
 * contract): runs the command with the task on stdin and in CLOISTER_* variables, streams
 * its stdout as progress, reads `KEY: value` and `NEXT:` lines into the result, and maps
 * the exit status (or a stop) to the outcome. */
#ifndef CLOISTER_WORKER_JOB_H
#define CLOISTER_WORKER_JOB_H

#include "specialist.h"

/* What every job of this worker runs, set up once by main(). */
typedef struct {
    char **argv;       /* the command after "--", in main's argv */
    int kill_grace_ms; /* SIGTERM to SIGKILL when stopping the command */
} worker_t;

/* The specialist job (specialist_job_fn): `arg` is the worker_t. */
specialist_outcome_t worker_job(specialist_ctx_t *ctx, void *arg);

#endif
