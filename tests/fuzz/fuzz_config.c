/* fuzz_config: feeds arbitrary bytes to the cloister.toml parser. Besides "no crash, no
 * leak, no undefined behaviour" it checks two promises of config.h and aborts if one breaks:
 * a refusal is always "fuzz.toml:line:col: expected ..., found ...", and a config that
 * parsed still answers every getter (known keys keep a value of their type). */
#include "config.h"
#include "failure.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads every entry a parsed config could hold through the getters. */
static void s_walk(const config_t *config)
{
    static const char *keys[] = {"in", "sync", "heartbeat_ms", "args", "max_budget_usd",
                                 "enabled", "model", "timeout", "x", ""};
    for (size_t t = 0; t < config_table_count(config); t++) {
        const char *table = config_table_name(config, t);
        if (table == NULL)
            abort();
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            (void)config_string(config, table, keys[k], NULL);
            (void)config_int(config, table, keys[k], 0);
            (void)config_double(config, table, keys[k], 0);
            (void)config_bool(config, table, keys[k], false);
            size_t n = config_array_len(config, table, keys[k]);
            for (size_t i = 0; i <= n; i++) {
                (void)config_array_string(config, table, keys[k], i);
                (void)config_array_int(config, table, keys[k], i, 0);
            }
        }
        if (strncmp(table, "specialists.", 12) == 0) {
            const char *name = table + 12;
            if (config_specialist_model(config, name) == NULL)
                abort();
            (void)config_specialist_timeout_s(config, name);
            (void)config_specialist_test_command(config, name);
            (void)config_specialist_enabled(config, name);
            (void)config_specialist_max_attempts(config, name);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    config_t *config = NULL;
    int rc = config_parse_buffer("fuzz.toml", (const char *)data, size, &config);
    if (rc == FAILURE_INVALID) {
        const char *message = failure_message();
        if (config != NULL || strncmp(message, "fuzz.toml:", 10) != 0
            || strstr(message, ": expected ") == NULL || strstr(message, ", found ") == NULL)
            abort();
        return 0;
    }
    if (rc != 0)
        return 0; /* out of memory */
    const char *sync = config_string(config, "broker", "sync", NULL);
    if (sync == NULL || config_string(config, "broker", "in", NULL) == NULL
        || config_int(config, "broker", "heartbeat_ms", 0) < 1
        || config_string(config, "review", "mode", NULL) == NULL)
        abort();
    s_walk(config);
    config_destroy(&config);
    return 0;
}
