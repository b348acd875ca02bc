/* agent_cli: finding an adapter, and building argv lists (see agent_cli.h). */
#include "agent_cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void s_append_owned(agent_argv_t *argv, char *arg)
{
    if (argv->failed || arg == NULL) {
        argv->failed = true;
        free(arg);
        return;
    }
    if (argv->count + 2 > argv->cap) {
        size_t cap = argv->cap ? argv->cap * 2 : 32;
        char **grown = realloc(argv->items, cap * sizeof *grown);
        if (grown == NULL) {
            argv->failed = true;
            free(arg);
            return;
        }
        argv->items = grown;
        argv->cap = cap;
    }
    argv->items[argv->count++] = arg;
    argv->items[argv->count] = NULL;
}

void agent_argv_add(agent_argv_t *argv, const char *arg)
{
    s_append_owned(argv, strdup(arg));
}

void agent_argv_addf(agent_argv_t *argv, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *arg = NULL;
    if (vasprintf(&arg, format, args) < 0)
        arg = NULL;
    va_end(args);
    s_append_owned(argv, arg);
}

void agent_argv_add_list(agent_argv_t *argv, const char *const *list)
{
    for (size_t i = 0; list != NULL && list[i] != NULL; i++)
        agent_argv_add(argv, list[i]);
}

void agent_argv_free(agent_argv_t *argv)
{
    for (size_t i = 0; i < argv->count; i++)
        free(argv->items[i]);
    free(argv->items);
    memset(argv, 0, sizeof *argv);
}

const agent_cli_t *agent_cli_find(const char *name)
{
    static const agent_cli_t *const all[] = {&agent_cli_claude, &agent_cli_codex,
                                             &agent_cli_gemini};
    if (name == NULL)
        return &agent_cli_claude;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(all[i]->name, name) == 0)
            return all[i];
    }
    return NULL;
}

bool agent_cli_mentions(const char *text, const char *needle)
{
    return text != NULL && strstr(text, needle) != NULL;
}
