/* specialist_reload: what a specialist's SIGHUP changed, and its report file (see
 * specialist_reload.h). */
#include "specialist_reload.h"

#include "failure.h"
#include "home.h"
#include "log.h"
#include "specialist_args.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What every specialist takes from the configuration once, at start (specialist_args.c). */
static const specialist_reload_key_t s_bus_keys[] = {
    {"broker", "in"},      {"broker", "heartbeat_ms"},     {"broker", "heartbeat_misses"},
    {"security", "curve"}, {"security", "allow_insecure"}, {NULL, NULL}};

typedef struct {
    const specialist_reload_rules_t *rules;
    char own_table[128]; /* "specialists.<name>" */
    specialist_reload_t *report;
} sorter_t;

/* Appends "[table] key" to a ", "-separated list (cut when it is full). */
static void s_add(char *list, size_t size, const char *table, const char *key)
{
    size_t len = strlen(list);
    if (len + 1 < size)
        snprintf(list + len, size - len, "%s[%s] %s", len ? ", " : "", table, key);
}

static bool s_in_keys(const specialist_reload_key_t *keys, const char *table, const char *key)
{
    for (size_t i = 0; keys != NULL && keys[i].table != NULL; i++)
        if (strcmp(keys[i].table, table) == 0 && strcmp(keys[i].key, key) == 0)
            return true;
    return false;
}

static bool s_reads_table(const sorter_t *sorter, const char *table)
{
    if (strcmp(table, sorter->own_table) == 0)
        return true;
    for (size_t i = 0; sorter->rules->tables && sorter->rules->tables[i]; i++)
        if (strcmp(sorter->rules->tables[i], table) == 0)
            return true;
    return false;
}

/* config_change_fn: one changed key, into `restart`, `applied` or neither. */
static void s_sort(const char *table, const char *key, void *arg)
{
    sorter_t *sorter = arg;
    specialist_reload_t *report = sorter->report;
    bool own = strcmp(table, sorter->own_table) == 0;
    if (s_in_keys(s_bus_keys, table, key) || s_in_keys(sorter->rules->restart_keys, table, key) ||
        (own && strcmp(key, "enabled") == 0) ||
        (own && strcmp(key, "timeout") == 0 && sorter->rules->timeout_fixed))
        s_add(report->restart, sizeof report->restart, table, key);
    else if (s_reads_table(sorter, table))
        s_add(report->applied, sizeof report->applied, table, key);
}

int specialist_reload_load(const specialist_reload_rules_t *rules, const config_t *old,
                           config_t **fresh, specialist_reload_t *report)
{
    memset(report, 0, sizeof *report);
    int rc = config_load(rules->config_path, fresh);
    if (rc != 0)
        return rc;
    sorter_t sorter = {.rules = rules, .report = report};
    snprintf(sorter.own_table, sizeof sorter.own_table, "specialists.%s", rules->specialist);
    config_each_change(old, *fresh, s_sort, &sorter);
    int64_t before = config_specialist_timeout_s(old, rules->specialist);
    int64_t after = config_specialist_timeout_s(*fresh, rules->specialist);
    if (!rules->timeout_fixed && after != before && after >= 1 &&
        after <= SPECIALIST_ARGS_MAX_TIMEOUT_S)
        report->default_timeout_s = (int)after;
    return 0;
}

int specialist_reload_report_path(char *buf, size_t size, pid_t pid)
{
    char relative[64];
    snprintf(relative, sizeof relative, "run/reload-%ld.json", (long)pid);
    return home_path(buf, size, relative);
}

void specialist_reload_report_write(const json_t *report)
{
    char dir[4096], path[4096], temp[4200];
    struct stat st;
    if (home_path(dir, sizeof dir, "run") != 0 || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return;
    if (specialist_reload_report_path(path, sizeof path, getpid()) != 0)
        return;
    snprintf(temp, sizeof temp, "%s.tmp", path);
    if (json_dump_file(report, temp, JSON_COMPACT) != 0 || rename(temp, path) != 0) {
        log_warn("cannot write the reload report %s", path);
        unlink(temp);
    }
}
