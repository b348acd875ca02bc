/* broker_reload: cloister.toml read again while the broker runs (see broker_internal.h).
 *
 * What the broker reads at every use changes at once, by swapping the configuration it
 * reads: the review gate's settings ([review] mode, [security] require_review), the
 * per-specialist timeout and max_attempts defaults, new [specialists.<name>] queues. What
 * it copied at start is copied again: the workspace roots, retry_backoff_ms,
 * event_retention, keep_finished_days, the authorized keys. What is bound or opened at
 * start (endpoints, the store's sync and WAL bound, the disk guard's thresholds, the
 * heartbeat the workers were told, CURVE itself) needs a restart, and the report says so.
 * A file that does not parse changes nothing. Earlier configurations are kept until the
 * broker ends: strings the start-up settings point into live in them. */
#include "broker_internal.h"

#include "failure.h"
#include "log.h"

#include <stdio.h>
#include <string.h>

/* Settings only a restart applies. */
static const struct {
    const char *table, *key;
} s_restart_keys[] = {
    {"broker", "in"},           {"broker", "events"},           {"broker", "control"},
    {"broker", "sync"},         {"broker", "heartbeat_ms"},     {"broker", "heartbeat_misses"},
    {"broker", "remote_heartbeat_misses"},
    {"broker", "wal_limit_mb"}, {"broker", "min_free_mb"},      {"broker", "reserve_mb"},
    {"security", "curve"},      {"security", "allow_insecure"},
};

/* Appends "[table] key" to a ", "-separated list. */
static void s_add(char *list, size_t size, const char *table, const char *key)
{
    size_t len = strlen(list);
    snprintf(list + len, size - len, "%s[%s] %s", len ? ", " : "", table, key);
}

/* True when the value of table.key reads differently in a and b (as text, whatever its
 * type; absent reads as ""). */
static bool s_differs(const config_t *a, const config_t *b, const char *table, const char *key)
{
    bool in_a = config_has(a, table, key), in_b = config_has(b, table, key);
    if (in_a != in_b)
        return true;
    if (!in_a)
        return false;
    char text_a[64], text_b[64];
    snprintf(text_a, sizeof text_a, "%s|%lld|%d", config_string(a, table, key, ""),
             (long long)config_int(a, table, key, 0), config_bool(a, table, key, false));
    snprintf(text_b, sizeof text_b, "%s|%lld|%d", config_string(b, table, key, ""),
             (long long)config_int(b, table, key, 0), config_bool(b, table, key, false));
    return strcmp(text_a, text_b) != 0;
}

/* Copies what the broker took from the configuration at start, and says what changed. */
static void s_apply_copies(broker_t *self, const config_t *fresh, broker_reload_t *report)
{
    struct {
        const char *key;
        int64_t *value;
    } numbers[] = {{"event_retention", &self->config.event_retention},
                   {"keep_finished_days", &self->config.keep_finished_days}};
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++) {
        int64_t value = config_int(fresh, "broker", numbers[i].key, *numbers[i].value);
        if (value != *numbers[i].value) {
            *numbers[i].value = value;
            s_add(report->applied, sizeof report->applied, "broker", numbers[i].key);
        }
    }
    int backoff =
        (int)config_int(fresh, "broker", "retry_backoff_ms", self->config.retry_backoff_ms);
    if (backoff != self->config.retry_backoff_ms) {
        self->config.retry_backoff_ms = backoff;
        s_add(report->applied, sizeof report->applied, "broker", "retry_backoff_ms");
    }
}

/* New queues for newly declared specialists, and every queue's defaults from `fresh`. */
static void s_apply_specialists(broker_t *self, const config_t *fresh, broker_reload_t *report)
{
    for (size_t i = 0; i < config_table_count(fresh); i++) {
        const char *table = config_table_name(fresh, i);
        if (table == NULL || strncmp(table, "specialists.", 12) != 0 || table[12] == '\0')
            continue;
        if (broker_queue(self, table + 12, false) == NULL && broker_queue(self, table + 12, true))
            s_add(report->applied, sizeof report->applied, table, "(a new queue)");
    }
    for (queue_t *queue = zhashx_first(self->queues); queue; queue = zhashx_next(self->queues)) {
        queue->default_timeout_s = (int)config_specialist_timeout_s(fresh, queue->name);
        queue->default_max_attempts = (int)config_specialist_max_attempts(fresh, queue->name);
    }
}

/* Returns `rc` with "not reloaded" in front of the reason failure_message() holds. */
static int s_refused(int rc)
{
    return failure_set(rc, "cloister.toml not reloaded, nothing changed: %s", failure_message());
}

int broker_reload(broker_t *self, broker_reload_t *report)
{
    memset(report, 0, sizeof *report);
    config_t *fresh = NULL;
    int rc = config_load(NULL, &fresh);
    if (rc != 0)
        return s_refused(rc);
    workspace_roots_t *roots = NULL;
    rc = workspace_roots_new(fresh, &roots);
    if (rc != 0) {
        config_destroy(&fresh);
        return s_refused(rc);
    }
    const config_t *old = self->config.config;
    for (size_t i = 0; i < sizeof s_restart_keys / sizeof s_restart_keys[0]; i++)
        if (s_differs(old, fresh, s_restart_keys[i].table, s_restart_keys[i].key))
            s_add(report->restart, sizeof report->restart, s_restart_keys[i].table,
                  s_restart_keys[i].key);
    if (strcmp(workspace_roots_text(roots), workspace_roots_text(self->workspace_roots)) != 0)
        s_add(report->applied, sizeof report->applied, "security", "workspace_roots");
    workspace_roots_destroy(&self->workspace_roots);
    self->workspace_roots = roots;
    const char *policy[][2] = {{"review", "mode"}, {"security", "require_review"}};
    for (size_t i = 0; i < sizeof policy / sizeof policy[0]; i++)
        if (s_differs(old, fresh, policy[i][0], policy[i][1]))
            s_add(report->applied, sizeof report->applied, policy[i][0], policy[i][1]);
    s_apply_copies(self, fresh, report);
    s_apply_specialists(self, fresh, report);
    zlistx_add_end(self->configs, fresh); /* kept: see the top */
    self->config.config = fresh;
    if (self->auth != NULL && broker_load_authorized(self) == 0)
        s_add(report->applied, sizeof report->applied, "keys", "authorized");
    log_info("reloaded cloister.toml: applied %s",
             report->applied[0] ? report->applied : "no change");
    if (report->restart[0])
        log_warn("changed in cloister.toml, applied only by a restart: %s", report->restart);
    log_info("workspaces accepted under: %s", workspace_roots_text(self->workspace_roots));
    return 0;
}
