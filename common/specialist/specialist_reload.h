/* specialist_reload: a specialist reading cloister.toml again on SIGHUP.
 *
 * The skeleton (specialist.h) reads SIGHUP from its signalfd and, between tasks (never
 * while a job runs: the job reads the service's settings), calls the service's reload
 * function (specialist_config_t.reload). That function loads the file with
 * specialist_reload_load(), which sorts what changed:
 *  - applied: keys of the tables the service reads at each task ([review], [agent], ...),
 *    which the service then swaps in, so they hold from its next task on;
 *  - restart: what the service took at start (the bus: [broker] in, heartbeat_ms,
 *    heartbeat_misses, [security] curve and allow_insecure; [specialists.<name>] enabled;
 *    the service's own, e.g. the merge-agent's workdir): named, logged, not applied.
 * Tables the service does not read are left out of both. A file that does not load (or a
 * value the service refuses) changes nothing: the settings in use stay, and the reason is
 * logged and reported.
 *
 * The report. After each SIGHUP the skeleton writes what it did to
 * <home>/run/reload-<pid>.json (specialist_reload_report_write), where `pan reload`, which
 * signals the services the launcher (deploy/run-local.sh) started through their pid files
 * in the same directory, reads it: first {"state": "pending", "task": ID} when a job runs
 * (the reload waits for it to end), then "reloaded" (with "applied" and "restart"),
 * "refused" (with "error") or "unsupported". Nothing is written when <home>/run does not
 * exist (no launcher: a container, a test). */
#ifndef CLOISTER_SPECIALIST_RELOAD_H
#define CLOISTER_SPECIALIST_RELOAD_H

#include "config.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The longest "[table] key, [table] key" list kept (a longer one is cut). */
#define SPECIALIST_RELOAD_LIST 1024

/* What a reload changed, filled by specialist_reload_load() and the service. */
typedef struct {
    char applied[SPECIALIST_RELOAD_LIST]; /* changed and applied from the next task on */
    char restart[SPECIALIST_RELOAD_LIST]; /* changed, applied only by a restart */
    int default_timeout_s; /* the lease of a task without timeout_s from now on; 0: as before */
} specialist_reload_t;

/* One key of the configuration: [table] key. */
typedef struct {
    const char *table, *key;
} specialist_reload_key_t;

/* What one service reads, for sorting the changes. Every pointer is borrowed. */
typedef struct {
    const char *specialist;  /* e.g. "review-agent": [specialists.<specialist>] is read */
    const char *config_path; /* NULL: $PANOPTICON_HOME/cloister.toml */
    /* Other tables it reads at each task, NULL-ended, e.g. {"review", "agent", NULL}. */
    const char *const *tables;
    /* Its own keys applied only at start, ended by {NULL, NULL}. NULL: none. */
    const specialist_reload_key_t *restart_keys;
    /* --timeout was given: [specialists.<name>] timeout does not apply. */
    bool timeout_fixed;
} specialist_reload_rules_t;

/* Loads the configuration again and compares it with `old` (borrowed) as the header says,
 * filling `report` (zeroed first). report->default_timeout_s is [specialists.<name>]
 * timeout when it changed, is within 1..SPECIALIST_ARGS_MAX_TIMEOUT_S and no --timeout
 * fixes the lease. Returns 0 and *fresh (the caller owns it: config_destroy()), or the
 * load's failure code with its reason in failure_message(); *fresh is then NULL. */
int specialist_reload_load(const specialist_reload_rules_t *rules, const config_t *old,
                           config_t **fresh, specialist_reload_t *report);

/* Writes "<home>/run/reload-<pid>.json" into buf. Returns 0, or FAILURE_TOO_BIG. */
int specialist_reload_report_path(char *buf, size_t size, pid_t pid);

/* Writes `report` (a JSON object, borrowed) to this process's report file, through a
 * temporary file and rename() so that a reader never sees half of it. Does nothing when
 * <home>/run is not a directory. A failure to write is logged, never fatal. */
void specialist_reload_report_write(const json_t *report);

#endif
