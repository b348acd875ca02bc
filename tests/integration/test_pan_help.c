/* pan <command> --help / -h / pan help <command>: every command pan's own usage lists has a
 * help of its own (exit 0, on stdout) that names every option the usage gives it. */
#include "check.h"
#include "testenv.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char s_usage[65536], s_help[65536];

static int s_pan(testenv_t *env, char *out, const char *a, const char *b)
{
    char *argv[] = {(char *)testenv_bin("pan"), (char *)a, (char *)b, NULL};
    return testenv_run(env, argv, out, sizeof s_help, 10000);
}

/* Checks command `name`'s help against the options `line` (its lines of the usage) names. */
static void s_check_command(testenv_t *env, const char *name, const char *options)
{
    CHECK_INT(s_pan(env, s_help, name, "--help"), 0);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "usage: pan %s", name);
    if (strncmp(s_help, prefix, strlen(prefix)) != 0)
        fprintf(stderr, "pan %s --help: %s\n", name, s_help);
    CHECK(strncmp(s_help, prefix, strlen(prefix)) == 0);
    for (const char *at = strstr(options, "--"); at != NULL; at = strstr(at + 2, "--")) {
        char option[64];
        size_t len = 2;
        while (len < sizeof option - 1 && (isalnum((unsigned char)at[len]) || at[len] == '-'))
            len++;
        snprintf(option, sizeof option, "%.*s", (int)len, at);
        if (len > 2 && strstr(s_help, option) == NULL) {
            fprintf(stderr, "pan %s --help does not explain %s\n", name, option);
            CHECK(strstr(s_help, option) != NULL);
        }
    }
    char copy[sizeof s_help];
    memcpy(copy, s_help, sizeof copy);
    CHECK_INT(s_pan(env, s_help, "help", name), 0);
    CHECK_STR(s_help, copy);
    CHECK_INT(s_pan(env, s_help, name, "-h"), 0);
    CHECK_STR(s_help, copy);
}

int main(void)
{
    testenv_t *env = testenv_new("pan-help");
    CHECK(env != NULL);
    CHECK_INT(s_pan(env, s_usage, "--help", NULL), 0);
    /* The usage lists commands as "  <name> ..." and continues them on deeper lines. */
    char *commands = strstr(s_usage, "commands:\n");
    CHECK(commands != NULL);
    char name[64] = "", options[4096] = "";
    int checked = 0;
    for (char *line = strtok(commands + strlen("commands:\n"), "\n"); line != NULL;
         line = strtok(NULL, "\n")) {
        bool command_line = line[0] == ' ' && line[1] == ' ' && isalpha((unsigned char)line[2]);
        bool continued = line[0] == ' ' && line[1] == ' ' && line[2] == ' ';
        if (!command_line && !continued) {
            break;
        }
        if (command_line) {
            if (name[0] != '\0') {
                s_check_command(env, name, options);
                checked++;
            }
            sscanf(line, " %63s", name);
            options[0] = '\0';
        }
        strncat(options, line, sizeof options - strlen(options) - 1);
    }
    if (name[0] != '\0') {
        s_check_command(env, name, options);
        checked++;
    }
    CHECK(checked >= 14);
    /* An unknown command's help is pan's usage, as a usage error. */
    CHECK_INT(s_pan(env, s_help, "frobnicate", "--help"), 2);
    testenv_destroy(&env);
    return check_exit_code("test_pan_help");
}
