/* test_config: the cloister.toml parser -- every value kind, every error with its exact
 * line:col, duplicates, defaults, specialist defaults and `_` normalisation, environment
 * overrides, and that loading never creates the file. */
#include "check.h"
#include "config.h"
#include "failure.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Parses `text` as "cloister.toml"; NULL if it failed (the reason is then printed). */
static config_t *parse_ok(const char *text)
{
    config_t *config = NULL;
    int rc = config_parse_buffer("cloister.toml", text, strlen(text), &config);
    if (rc != 0)
        fprintf(stderr, "unexpected parse failure: %s\n", failure_message());
    CHECK_INT(rc, 0);
    return config;
}

/* Checks that `text` is refused with exactly `message`. */
static void expect_error(const char *text, const char *message)
{
    config_t *config = NULL;
    int rc = config_parse_buffer("cloister.toml", text, strlen(text), &config);
    CHECK_INT(rc, FAILURE_INVALID);
    CHECK(config == NULL);
    if (rc != 0)
        CHECK_STR(failure_message(), message);
    config_destroy(&config);
}

static void test_defaults(void)
{
    config_t *config = config_defaults();
    CHECK(config != NULL);
    CHECK_STR(config_string(config, "broker", "in", NULL), "tcp://127.0.0.1:5560");
    CHECK_STR(config_string(config, "broker", "events", NULL), "tcp://127.0.0.1:5561");
    CHECK_STR(config_string(config, "broker", "control", NULL), "tcp://127.0.0.1:5562");
    CHECK_STR(config_string(config, "broker", "sync", NULL), "full");
    CHECK_INT(config_int(config, "broker", "heartbeat_ms", -1), 1000);
    CHECK_INT(config_int(config, "broker", "heartbeat_misses", -1), 3);
    CHECK_INT(config_int(config, "broker", "event_retention", -1), 100000);
    CHECK_INT(config_int(config, "broker", "max_attempts", -1), 3);
    CHECK_INT(config_int(config, "broker", "retry_backoff_ms", -1), 1000);
    CHECK_STR(config_string(config, "agent", "command", NULL), "claude");
    CHECK(config_has(config, "agent", "args"));
    CHECK_INT(config_array_len(config, "agent", "args"), 0);
    CHECK_STR(config_string(config, "agent", "permission_mode", NULL), "acceptEdits");
    CHECK_INT(config_array_len(config, "agent", "allowed_tools"), 0);
    CHECK_INT(config_array_len(config, "agent", "disallowed_tools"), 0);
    CHECK_INT(config_int(config, "agent", "max_turns", -1), 50);
    CHECK(!config_has(config, "agent", "max_budget_usd"));
    CHECK_INT(config_int(config, "agent", "session_token_limit", -1), 150000);
    CHECK_INT(config_int(config, "agent", "no_output_timeout", -1), 300);
    CHECK_INT(config_int(config, "agent", "result_grace_ms", -1), 2000);
    CHECK(config_string(config, "agent", "append_system_prompt", NULL) == NULL);
    CHECK_STR(config_string(config, "review", "mode", NULL), "normal");
    CHECK_STR(config_string(config, "context", "custom_instructions", NULL), "");
    CHECK_INT(config_int(config, "context", "relevant_files_limit", -1), 10);
    CHECK_INT(config_int(config, "context", "tree_budget_chars", -1), 4000);
    CHECK_INT(config_int(config, "context", "files_budget_chars", -1), 12000);
    CHECK_INT(config_int(config, "context", "session_context_limit", -1), 10);
    CHECK_STR(config_string(config, "merge", "remote", NULL), "origin");
    CHECK_INT(config_int(config, "merge", "push_retries", -1), 3);
    /* Fallbacks for what is not there or has another type. */
    CHECK_STR(config_string(config, "nope", "x", "fb"), "fb");
    CHECK_STR(config_string(config, "broker", "heartbeat_ms", "fb"), "fb");
    CHECK_INT(config_int(config, "broker", "in", 7), 7);
    CHECK(config_bool(config, "broker", "in", true));
    CHECK(config_array_string(config, "agent", "args", 0) == NULL);
    config_destroy(&config);
    CHECK(config == NULL);
    config_destroy(&config); /* harmless twice */
}

static void test_value_kinds(void)
{
    config_t *config = parse_ok(
        "# Cloister settings\n"
        "top = 'root level'\n"
        "\n"
        "[strings]\n"
        "basic = \"say \\\"hi\\\" \\\\ tab\\there\\nnext\"   # comment after a value\n"
        "unicode = \"caf\\u00e9 \\U0001F600\"\n"
        "literal = 'C:\\path\\no\\escapes'\n"
        "hash_inside = \"a # not a comment\"\n"
        "\"quoted key\" = \"q\"\n"
        "'literal key' = 'l'\n"
        "empty = \"\"\n"
        "\n"
        "[numbers]\n"
        "plain = 42\n"
        "negative = -17\n"
        "positive = +5\n"
        "zero = 0\n"
        "grouped = 1_000_000\n"
        "largest = 9223372036854775807\n"
        "smallest = -9223372036854775808\n"
        "pi = 3.14159\n"
        "exponent = -2e3\n"
        "both = 6.5E-1\n"
        "grouped_float = 1_000.5\n"
        "\n"
        "[flags]\n"
        "yes = true\n"
        "no = false#tight comment\n"
        "\n"
        "[lists]\n"
        "words = [\"a\", 'b', \"c\\n\"]\n"
        "numbers = [1, -2, 3_000]\n"
        "empty = []\n"
        "multi = [\n"
        "    \"one\",   # first\n"
        "    # a whole comment line\n"
        "\n"
        "    \"two\",\n"
        "]\n"
        "after_multi = 1\n");
    CHECK(config != NULL);
    CHECK_STR(config_string(config, "", "top", NULL), "root level");
    CHECK_STR(config_string(config, "strings", "basic", NULL),
              "say \"hi\" \\ tab\there\nnext");
    CHECK_STR(config_string(config, "strings", "unicode", NULL), "caf\xc3\xa9 \xf0\x9f\x98\x80");
    CHECK_STR(config_string(config, "strings", "literal", NULL), "C:\\path\\no\\escapes");
    CHECK_STR(config_string(config, "strings", "hash_inside", NULL), "a # not a comment");
    CHECK_STR(config_string(config, "strings", "quoted key", NULL), "q");
    CHECK_STR(config_string(config, "strings", "literal key", NULL), "l");
    CHECK_STR(config_string(config, "strings", "empty", "x"), "");
    CHECK_INT(config_int(config, "numbers", "plain", 0), 42);
    CHECK_INT(config_int(config, "numbers", "negative", 0), -17);
    CHECK_INT(config_int(config, "numbers", "positive", 0), 5);
    CHECK_INT(config_int(config, "numbers", "zero", 9), 0);
    CHECK_INT(config_int(config, "numbers", "grouped", 0), 1000000);
    CHECK(config_int(config, "numbers", "largest", 0) == INT64_MAX);
    CHECK(config_int(config, "numbers", "smallest", 0) == INT64_MIN);
    CHECK(config_double(config, "numbers", "pi", 0) == 3.14159);
    CHECK(config_double(config, "numbers", "exponent", 0) == -2000.0);
    CHECK(config_double(config, "numbers", "both", 0) == 0.65);
    CHECK(config_double(config, "numbers", "grouped_float", 0) == 1000.5);
    CHECK(config_double(config, "numbers", "plain", 0) == 42.0); /* ints read as doubles */
    CHECK_INT(config_int(config, "numbers", "pi", -1), -1);      /* but floats are not ints */
    CHECK(config_bool(config, "flags", "yes", false) == true);
    CHECK(config_bool(config, "flags", "no", true) == false);
    CHECK_INT(config_array_len(config, "lists", "words"), 3);
    CHECK_STR(config_array_string(config, "lists", "words", 0), "a");
    CHECK_STR(config_array_string(config, "lists", "words", 1), "b");
    CHECK_STR(config_array_string(config, "lists", "words", 2), "c\n");
    CHECK(config_array_string(config, "lists", "words", 3) == NULL);
    CHECK_INT(config_array_len(config, "lists", "numbers"), 3);
    CHECK_INT(config_array_int(config, "lists", "numbers", 1, 0), -2);
    CHECK_INT(config_array_int(config, "lists", "numbers", 2, 0), 3000);
    CHECK_INT(config_array_int(config, "lists", "words", 0, -9), -9);
    CHECK(config_array_string(config, "lists", "numbers", 0) == NULL);
    CHECK_INT(config_array_len(config, "lists", "empty"), 0);
    CHECK(config_has(config, "lists", "empty"));
    CHECK_INT(config_array_len(config, "lists", "multi"), 2);
    CHECK_STR(config_array_string(config, "lists", "multi", 1), "two");
    CHECK_INT(config_int(config, "lists", "after_multi", 0), 1);
    CHECK_INT(config_array_len(config, "strings", "basic"), 0); /* not an array */
    config_destroy(&config);
}

static void test_known_keys_from_file(void)
{
    config_t *config = parse_ok("[broker]\n"
                                "in = \"ipc:///tmp/in\"\n"
                                "sync = \"normal\"\n"
                                "heartbeat_ms = 250\n"
                                "[agent]\n"
                                "command = \"/usr/bin/fake-agent\"\n"
                                "args = [\"--verbose\", \"--x\"]\n"
                                "max_budget_usd = 5\n"
                                "append_system_prompt = \"Be brief.\"\n"
                                "[review]\n"
                                "mode = \"yolo\"\n");
    CHECK(config != NULL);
    CHECK_STR(config_string(config, "broker", "in", NULL), "ipc:///tmp/in");
    CHECK_STR(config_string(config, "broker", "events", NULL), "tcp://127.0.0.1:5561");
    CHECK_STR(config_string(config, "broker", "sync", NULL), "normal");
    CHECK_INT(config_int(config, "broker", "heartbeat_ms", 0), 250);
    CHECK_STR(config_string(config, "agent", "command", NULL), "/usr/bin/fake-agent");
    CHECK_INT(config_array_len(config, "agent", "args"), 2);
    CHECK_STR(config_array_string(config, "agent", "args", 1), "--x");
    /* An integer is accepted for a float key and stored as a float. */
    CHECK(config_double(config, "agent", "max_budget_usd", 0) == 5.0);
    CHECK_STR(config_string(config, "agent", "append_system_prompt", NULL), "Be brief.");
    CHECK_STR(config_string(config, "review", "mode", NULL), "yolo");
    config_destroy(&config);

    config = parse_ok("[agent]\nmax_budget_usd = 2.5\n");
    if (config)
        CHECK(config_double(config, "agent", "max_budget_usd", 0) == 2.5);
    config_destroy(&config);
}

static void test_unknown_tables_kept(void)
{
    config_t *config = parse_ok("[monitoring]\n"
                                "check_interval = 60\n"
                                "heartbeat_sources = [\"jsonl_mtime\", \"git_activity\"]\n"
                                "[handoffs.auto_triggers.test_failure]\n"
                                "trigger_on = \"any_failure\"\n"
                                "[broker]\n"
                                "future_key = true\n");
    CHECK(config != NULL);
    CHECK_INT(config_int(config, "monitoring", "check_interval", 0), 60);
    CHECK_STR(config_array_string(config, "monitoring", "heartbeat_sources", 1),
              "git_activity");
    CHECK_STR(config_string(config, "handoffs.auto_triggers.test_failure", "trigger_on", NULL),
              "any_failure");
    CHECK(config_bool(config, "broker", "future_key", false));
    bool seen = false;
    for (size_t i = 0; i < config_table_count(config); i++) {
        if (strcmp(config_table_name(config, i), "handoffs.auto_triggers.test_failure") == 0)
            seen = true;
    }
    CHECK(seen);
    CHECK(config_table_name(config, config_table_count(config)) == NULL);
    config_destroy(&config);
}

static void test_specialists(void)
{
    config_t *config = parse_ok("[specialists.merge_agent]\n"
                                "enabled = false\n"
                                "auto_wake = true\n"
                                "[specialists.test-agent]\n"
                                "test_command = \"npm test\"\n"
                                "timeout = 120\n"
                                "max_attempts = 5\n"
                                "workdir = \"/srv/repo\"\n"
                                "[specialists.docs-agent]\n"
                                "model = \"opus\"\n");
    CHECK(config != NULL);
    /* The underscore spelling is the same specialist, whichever spelling asks. */
    CHECK(!config_specialist_enabled(config, "merge-agent"));
    CHECK(!config_specialist_enabled(config, "merge_agent"));
    CHECK(config_specialist_auto_wake(config, "merge-agent"));
    CHECK(!config_bool(config, "specialists.merge-agent", "enabled", true));
    CHECK(!config_bool(config, "specialists.merge_agent", "enabled", true));
    CHECK(config_bool(config, "specialists.merge-agent", "auto_wake", false));
    bool normalised = false;
    for (size_t i = 0; i < config_table_count(config); i++) {
        const char *name = config_table_name(config, i);
        CHECK(strcmp(name, "specialists.merge_agent") != 0);
        if (strcmp(name, "specialists.merge-agent") == 0)
            normalised = true;
    }
    CHECK(normalised);
    /* Defaults per specialist. */
    CHECK_STR(config_specialist_model(config, "merge-agent"), "sonnet");
    CHECK_STR(config_specialist_model(config, "review-agent"), "sonnet");
    CHECK_STR(config_specialist_model(config, "test-agent"), "haiku");
    CHECK_STR(config_specialist_model(config, "test_agent"), "haiku");
    CHECK_STR(config_specialist_model(config, "custom-agent"), "sonnet");
    CHECK_STR(config_specialist_model(config, "docs-agent"), "opus");
    CHECK_INT(config_specialist_timeout_s(config, "merge-agent"), 900);
    CHECK_INT(config_specialist_timeout_s(config, "merge_agent"), 900);
    CHECK_INT(config_specialist_timeout_s(config, "review-agent"), 600);
    CHECK_INT(config_specialist_timeout_s(config, "test-agent"), 120);
    CHECK(config_specialist_enabled(config, "review-agent"));
    CHECK(!config_specialist_auto_wake(config, "review-agent"));
    CHECK_STR(config_specialist_test_command(config, "test-agent"), "npm test");
    CHECK_STR(config_specialist_test_command(config, "test_agent"), "npm test");
    CHECK(config_specialist_test_command(config, "review-agent") == NULL);
    CHECK_STR(config_specialist_workdir(config, "test-agent"), "/srv/repo");
    CHECK(config_specialist_workdir(config, "merge-agent") == NULL);
    CHECK_INT(config_specialist_max_attempts(config, "test-agent"), 5);
    CHECK_INT(config_specialist_max_attempts(config, "merge-agent"), 3); /* broker's */
    config_destroy(&config);

    config = parse_ok("[broker]\nmax_attempts = 7\n");
    if (config)
        CHECK_INT(config_specialist_max_attempts(config, "review-agent"), 7);
    config_destroy(&config);
}

/* The agent CLI per specialist: [specialists.X] agent, else [agent] cli; [agent] command is
 * the command of [agent] cli only; Claude's model aliases are not given to another CLI. */
static void test_specialist_cli(void)
{
    config_t *config = parse_ok("[agent]\ncommand = \"/opt/claude\"\n"
                                "[specialists.review-agent]\nagent = \"codex\"\n"
                                "[specialists.test-agent]\nagent = \"gemini\"\n"
                                "command = \"/opt/gemini\"\nmodel = \"gemini-2.5-pro\"\n");
    CHECK(config != NULL);
    CHECK_STR(config_specialist_cli(config, "merge-agent"), "claude");
    CHECK_STR(config_specialist_command(config, "merge-agent"), "/opt/claude");
    CHECK_STR(config_specialist_model(config, "merge-agent"), "sonnet");
    CHECK_STR(config_specialist_cli(config, "review-agent"), "codex");
    CHECK(config_specialist_command(config, "review-agent") == NULL);
    CHECK(config_specialist_model(config, "review-agent") == NULL);
    CHECK_STR(config_specialist_cli(config, "test_agent"), "gemini");
    CHECK_STR(config_specialist_command(config, "test-agent"), "/opt/gemini");
    CHECK_STR(config_specialist_model(config, "test-agent"), "gemini-2.5-pro");
    config_destroy(&config);

    config = parse_ok("[agent]\ncli = \"codex\"\ncommand = \"/opt/codex\"\n");
    CHECK(config != NULL);
    CHECK_STR(config_specialist_cli(config, "merge-agent"), "codex");
    CHECK_STR(config_specialist_command(config, "merge-agent"), "/opt/codex");
    config_destroy(&config);

    expect_error("[agent]\ncli = \"cursor\"\n",
                 "cloister.toml:2:7: expected one of claude|codex|gemini for agent.cli, found \"cursor\"");
    expect_error("[specialists.review-agent]\nagent = \"gpt\"\n",
                 "cloister.toml:2:9: expected one of claude|codex|gemini for specialists.review-agent.agent, found \"gpt\"");
}

#define VALUE "a value (string, number, boolean or array)"
#define ESCAPES "an escape (\\\" \\\\ \\b \\t \\n \\f \\r \\uXXXX or \\UXXXXXXXX)"

static void test_syntax_errors(void)
{
    /* Values. */
    expect_error("[specialists.merge-agent]\nenabled = yes\n",
                 "cloister.toml:2:11: expected " VALUE ", found 'yes'");
    expect_error("x =\n", "cloister.toml:1:4: expected " VALUE ", found end of line");
    expect_error("x = ", "cloister.toml:1:5: expected " VALUE ", found end of file");
    expect_error("x = {a = 1}\n",
                 "cloister.toml:1:5: expected " VALUE ", found '{' (inline tables are not supported)");
    expect_error("x = \"\"\"multi\"\"\"\n",
                 "cloister.toml:1:5: expected " VALUE ", found '\"\"\"' (multi-line strings are not supported)");
    expect_error("x = 1979-05-27\n", "cloister.toml:1:5: expected " VALUE ", found '1979-05-27'");
    expect_error("x = 007\n", "cloister.toml:1:5: expected " VALUE ", found '007'");
    expect_error("x = 1__0\n", "cloister.toml:1:5: expected " VALUE ", found '1__0'");
    expect_error("x = 1_\n", "cloister.toml:1:5: expected " VALUE ", found '1_'");
    expect_error("x = 1.\n", "cloister.toml:1:5: expected " VALUE ", found '1.'");
    expect_error("x = .5\n", "cloister.toml:1:5: expected " VALUE ", found '.5'");
    expect_error("x = inf\n", "cloister.toml:1:5: expected " VALUE ", found 'inf'");
    expect_error("x = TRUE\n", "cloister.toml:1:5: expected " VALUE ", found 'TRUE'");
    expect_error("x = 9223372036854775808\n",
                 "cloister.toml:1:5: expected a 64-bit integer, found '9223372036854775808'");
    expect_error("x = 1e999\n", "cloister.toml:1:5: expected a float within range, found '1e999'");
    expect_error("x = 1 2\n", "cloister.toml:1:7: expected end of line, found '2'");
    expect_error("x = \"a\" \"b\"\n", "cloister.toml:1:9: expected end of line, found '\"'");
    /* Strings. */
    expect_error("x = \"abc\n", "cloister.toml:1:9: expected a closing '\"', found end of line");
    expect_error("x = 'abc", "cloister.toml:1:9: expected a closing \"'\", found end of file");
    expect_error("x = \"a\\qb\"\n", "cloister.toml:1:7: expected " ESCAPES ", found '\\q'");
    expect_error("x = \"a\\u12G4\"\n",
                 "cloister.toml:1:11: expected 4 hex digits after \\u, found 'G4'");
    expect_error("x = \"\\uD800\"\n",
                 "cloister.toml:1:6: expected a Unicode character other than NUL or a "
                 "surrogate, found U+D800");
    expect_error("x = \"\\u0000\"\n",
                 "cloister.toml:1:6: expected a Unicode character other than NUL or a "
                 "surrogate, found U+0000");
    expect_error("x = \"a\x01\"\n",
                 "cloister.toml:1:7: expected a string character, found control character 0x01");
    /* Columns count characters, not bytes. */
    expect_error("x = \"\xc3\xa9\xc3\xa9\" y\n", "cloister.toml:1:10: expected end of line, found 'y'");
    /* Keys and lines. */
    expect_error("key value\n", "cloister.toml:1:5: expected '=', found 'value'");
    expect_error("a.b = 1\n",
                 "cloister.toml:1:2: expected '=', found '.' (dotted keys are not supported; use a [table])");
    expect_error("= 1\n",
                 "cloister.toml:1:1: expected a key, a [table] header or a comment, found '='");
    expect_error("\"\" = 1\n", "cloister.toml:1:1: expected a non-empty key, found an empty quoted key");
    expect_error("x = 1 # bad \x02 comment\n",
                 "cloister.toml:1:13: expected comment text, found control character 0x02");
    expect_error("x = 1\r\ny = 2\rz = 3\n",
                 "cloister.toml:2:6: expected end of line, found control character 0x0d");
    /* Headers. */
    expect_error("[broker\nin = \"x\"\n", "cloister.toml:1:8: expected '.' or ']', found end of line");
    expect_error("[[specialists]]\n",
                 "cloister.toml:1:1: expected a table name, found '[[' (arrays of tables are not supported)");
    expect_error("[a..b]\n",
                 "cloister.toml:1:4: expected a key (letters, digits, '_', '-' or a quoted string), found '.b'");
    expect_error("[]\n",
                 "cloister.toml:1:2: expected a key (letters, digits, '_', '-' or a quoted string), found ']'");
    expect_error("[specialists.\"a.b\"]\n",
                 "cloister.toml:1:14: expected a table name part without '.', found a quoted '.'");
    expect_error("[broker] x = 1\n", "cloister.toml:1:10: expected end of line, found 'x'");
    /* Arrays. */
    expect_error("x = [1 2]\n", "cloister.toml:1:8: expected ',' or ']', found '2'");
    expect_error("x = [1, \"a\"]\n",
                 "cloister.toml:1:9: expected an integer like the first element, found a string");
    expect_error("x = [\"a\", 2]\n",
                 "cloister.toml:1:11: expected a string like the first element, found an integer");
    expect_error("x = [[1]]\n",
                 "cloister.toml:1:6: expected a string or an integer, found '[' (nested arrays are not supported)");
    expect_error("x = [true]\n",
                 "cloister.toml:1:6: expected a string or an integer, found a boolean");
    expect_error("x = [1.5]\n", "cloister.toml:1:6: expected a string or an integer, found a float");
    expect_error("x = [\n  \"a\",\n  \"b\"\n", "cloister.toml:4:1: expected ',' or ']', found end of file");
    expect_error("x = [,]\n", "cloister.toml:1:6: expected a string or an integer, found ','");
}

static void test_duplicates(void)
{
    expect_error("[broker]\nin = \"a\"\nin = \"b\"\n",
                 "cloister.toml:3:1: expected a new key, found 'in' again (first at line 2)");
    expect_error("[x]\na = 1\n\"a\" = 2\n",
                 "cloister.toml:3:1: expected a new key, found 'a' again (first at line 2)");
    expect_error("[broker]\nin = \"a\"\n[agent]\n[broker]\n",
                 "cloister.toml:4:1: expected a new table, found [broker] again (first at line 1)");
    expect_error("[specialists.merge_agent]\nenabled = true\n\n[specialists.merge-agent]\n",
                 "cloister.toml:4:1: expected a new table, found [specialists.merge-agent] again "
                 "(first at line 1)");
    /* The same key in different tables is fine, and so is a known key once. */
    config_t *config = parse_ok("[a]\nk = 1\n[b]\nk = 2\n[broker]\nin = \"x\"\n");
    if (config) {
        CHECK_INT(config_int(config, "a", "k", 0), 1);
        CHECK_INT(config_int(config, "b", "k", 0), 2);
    }
    config_destroy(&config);
}

static void test_type_errors(void)
{
    expect_error("[broker]\nheartbeat_ms = \"1000\"\n",
                 "cloister.toml:2:16: expected an integer >= 1 for broker.heartbeat_ms, found a string");
    expect_error("[broker]\nheartbeat_ms = -5\n",
                 "cloister.toml:2:16: expected an integer >= 1 for broker.heartbeat_ms, found -5");
    expect_error("[broker]\nin = 5560\n",
                 "cloister.toml:2:6: expected a string for broker.in, found an integer");
    expect_error("[broker]\nsync = \"fast\"\n",
                 "cloister.toml:2:8: expected one of full|normal|off for broker.sync, found \"fast\"");
    expect_error("[review]\nmode = \"lenient\"\n",
                 "cloister.toml:2:8: expected one of strict|normal|yolo|disabled for review.mode, "
                 "found \"lenient\"");
    expect_error("[agent]\nargs = [1, 2]\n",
                 "cloister.toml:2:8: expected an array of strings for agent.args, found an array of integers");
    expect_error("[agent]\nallowed_tools = \"Bash\"\n",
                 "cloister.toml:2:17: expected an array of strings for agent.allowed_tools, found a string");
    expect_error("[agent]\nmax_budget_usd = true\n",
                 "cloister.toml:2:18: expected a number >= 0 for agent.max_budget_usd, found a boolean");
    expect_error("[agent]\nmax_budget_usd = -1.5\n",
                 "cloister.toml:2:18: expected a number >= 0 for agent.max_budget_usd, found -1.5");
    expect_error("[specialists.merge_agent]\nenabled = \"yes\"\n",
                 "cloister.toml:2:11: expected a boolean for specialists.merge-agent.enabled, found a string");
    expect_error("[specialists.test-agent]\ntimeout = 1.5\n",
                 "cloister.toml:2:11: expected an integer >= 1 for specialists.test-agent.timeout, found a float");
    expect_error("[specialists.test-agent]\n\ttest_command = ['npm', 'test']\n",
                 "cloister.toml:2:17: expected a string for specialists.test-agent.test_command, found an array");
    /* Keys the services read that the example file shows: a wrong type is no longer
     * silently ignored (a string `checks` used to turn the review's checks off). */
    expect_error("[review]\nchecks = \"make lint\"\n",
                 "cloister.toml:2:10: expected an array of strings for review.checks, found a string");
    expect_error("[review]\ncheck_timeout_s = \"300\"\n",
                 "cloister.toml:2:19: expected an integer >= 1 for review.check_timeout_s, found a string");
    expect_error("[review]\ndiff_budget_chars = true\n",
                 "cloister.toml:2:21: expected an integer >= 1 for review.diff_budget_chars, found a boolean");
    expect_error("[agent]\nprompts_dir = 5\n",
                 "cloister.toml:2:15: expected a string for agent.prompts_dir, found an integer");
    expect_error("[specialists.test-agent]\nfix = \"yes\"\n",
                 "cloister.toml:2:7: expected a boolean for specialists.test-agent.fix, found a string");
    /* Known key names in unknown places are not checked. */
    config_t *config = parse_ok("heartbeat_ms = \"x\"\n[specialists.a.b]\nenabled = \"x\"\n");
    config_destroy(&config);
}

static void test_buffer_edges(void)
{
    /* The buffer need not be NUL-terminated: only `len` bytes are read. */
    const char *text = "x = 1\ny = 2";
    config_t *config = NULL;
    CHECK_INT(config_parse_buffer("cloister.toml", text, 6, &config), 0);
    CHECK_INT(config_int(config, "", "x", 0), 1);
    CHECK(!config_has(config, "", "y"));
    config_destroy(&config);
    /* An embedded NUL is refused. */
    CHECK_INT(config_parse_buffer("f.toml", "x = 1\n\0", 7, &config), FAILURE_INVALID);
    CHECK_STR(failure_message(),
              "f.toml:2:1: expected a key, a [table] header or a comment, found control character 0x00");
    /* An empty file and CRLF line endings. */
    config = parse_ok("");
    config_destroy(&config);
    config = parse_ok("[merge]\r\nremote = \"upstream\"\r\n# c\r\n");
    if (config)
        CHECK_STR(config_string(config, "merge", "remote", NULL), "upstream");
    config_destroy(&config);
}

static void test_limits(void)
{
    /* Too many tables or keys is an error, not a slow parse. The defaults already hold nine
     * tables ("", broker, agent, review, context, merge, web, hooks, pipeline). */
    size_t size = 64 * 1024;
    char *text = malloc(size);
    size_t len = 0;
    for (int i = 0; i < 1000; i++)
        len += (size_t)snprintf(text + len, size - len, "[t%d]\n", i);
    config_t *config = NULL;
    CHECK_INT(config_parse_buffer("cloister.toml", text, len, &config), FAILURE_INVALID);
    CHECK_STR(failure_message(),
              "cloister.toml:992:1: expected at most 1000 tables, found one more");

    len = (size_t)snprintf(text, size, "[t]\n");
    for (int i = 0; i <= 1000; i++)
        len += (size_t)snprintf(text + len, size - len, "k%d = 1\n", i);
    CHECK_INT(config_parse_buffer("cloister.toml", text, len, &config), FAILURE_INVALID);
    CHECK_STR(failure_message(),
              "cloister.toml:1002:1: expected at most 1000 keys in a table, found one more");
    free(text);

    /* A huge one-line array parses in linear time (columns are only counted on error). */
    size_t count = 300000;
    size = count * 2 + 16;
    text = malloc(size);
    len = (size_t)snprintf(text, size, "x = [");
    for (size_t i = 0; i < count; i++) {
        text[len++] = '7';
        text[len++] = ',';
    }
    text[len++] = ']';
    CHECK_INT(config_parse_buffer("cloister.toml", text, len, &config), 0);
    CHECK_INT(config_array_len(config, "", "x"), count);
    config_destroy(&config);
    free(text);
}

/* Makes a private $PANOPTICON_HOME; returns its path (static). */
static const char *make_home(void)
{
    static char dir[64];
    snprintf(dir, sizeof dir, "/tmp/test_config.XXXXXX");
    if (mkdtemp(dir) == NULL)
        return NULL;
    setenv("PANOPTICON_HOME", dir, 1);
    return dir;
}

static void write_file(const char *path, const char *text)
{
    FILE *file = fopen(path, "w");
    CHECK(file != NULL);
    if (file) {
        fputs(text, file);
        fclose(file);
    }
}

static void test_load_missing_file(const char *home)
{
    char path[256];
    snprintf(path, sizeof path, "%s/cloister.toml", home);
    config_t *config = NULL;
    CHECK_INT(config_load(NULL, &config), 0);
    CHECK_STR(config_string(config, "broker", "in", NULL), "tcp://127.0.0.1:5560");
    CHECK_STR(config_specialist_model(config, "test-agent"), "haiku");
    CHECK(access(path, F_OK) != 0); /* the file was not created */
    config_destroy(&config);

    CHECK_INT(config_load("/nonexistent/dir/cloister.toml", &config), 0);
    CHECK(config != NULL);
    config_destroy(&config);
}

static void test_load_file(const char *home)
{
    char path[256];
    snprintf(path, sizeof path, "%s/cloister.toml", home);
    write_file(path, "[merge]\nremote = \"upstream\"\n");
    config_t *config = NULL;
    CHECK_INT(config_load(NULL, &config), 0);
    CHECK_STR(config_string(config, "merge", "remote", NULL), "upstream");
    config_destroy(&config);

    /* Errors name the file as given. */
    write_file(path, "[merge]\npush_retries = lots\n");
    CHECK_INT(config_load(path, &config), FAILURE_INVALID);
    CHECK(config == NULL);
    char expected[512];
    snprintf(expected, sizeof expected, "%s:2:16: expected " VALUE ", found 'lots'", path);
    CHECK_STR(failure_message(), expected);

    /* A directory is not a readable file. */
    CHECK(config_load(home, &config) < 0);
    CHECK(config == NULL);
    unlink(path);
}

static void test_environment(const char *home)
{
    char path[256];
    snprintf(path, sizeof path, "%s/cloister.toml", home);
    write_file(path, "[broker]\nin = \"tcp://10.0.0.1:1\"\nevents = \"tcp://10.0.0.1:2\"\n"
                     "[agent]\ncommand = \"from-file\"\n");
    setenv("CLOISTER_IN", "ipc:///tmp/env-in", 1);
    setenv("CLOISTER_CONTROL", "ipc:///tmp/env-control", 1);
    setenv("CLOISTER_EVENTS", "", 1); /* empty: ignored */
    setenv("CLOISTER_SYNC", "off", 1);
    setenv("CLOISTER_AGENT_COMMAND", "/opt/fake-agent", 1);
    config_t *config = NULL;
    CHECK_INT(config_load(NULL, &config), 0);
    CHECK_STR(config_string(config, "broker", "in", NULL), "ipc:///tmp/env-in");
    CHECK_STR(config_string(config, "broker", "events", NULL), "tcp://10.0.0.1:2");
    CHECK_STR(config_string(config, "broker", "control", NULL), "ipc:///tmp/env-control");
    CHECK_STR(config_string(config, "broker", "sync", NULL), "off");
    CHECK_STR(config_string(config, "agent", "command", NULL), "/opt/fake-agent");
    config_destroy(&config);

    /* Overrides apply without a file too; parse_buffer ignores the environment. */
    unlink(path);
    CHECK_INT(config_load(NULL, &config), 0);
    CHECK_STR(config_string(config, "broker", "in", NULL), "ipc:///tmp/env-in");
    config_destroy(&config);
    config = parse_ok("");
    if (config)
        CHECK_STR(config_string(config, "broker", "in", NULL), "tcp://127.0.0.1:5560");
    config_destroy(&config);

    /* CLOISTER_SYNC is validated like the file. */
    setenv("CLOISTER_SYNC", "sometimes", 1);
    CHECK_INT(config_load(NULL, &config), FAILURE_INVALID);
    CHECK(config == NULL);
    CHECK_STR(failure_message(), "CLOISTER_SYNC: expected one of full|normal|off, found \"sometimes\"");

    unsetenv("CLOISTER_IN");
    unsetenv("CLOISTER_CONTROL");
    unsetenv("CLOISTER_EVENTS");
    unsetenv("CLOISTER_SYNC");
    unsetenv("CLOISTER_AGENT_COMMAND");
}

/* A key Cloister does not know, in a table it reads, is kept but warned about (a typo
 * would otherwise silently do nothing); keys of tables it does not read are not. */
static void test_unknown_key_warned(void)
{
    char path[] = "/tmp/cloister-config-warn-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    int saved = dup(2);
    dup2(fd, 2);
    config_t *config = parse_ok("[review]\nchekcs = [\"make lint\"]\n[monitoring]\ncheck_interval = 60\n");
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    config_destroy(&config);
    char logged[2048] = "";
    ssize_t n = pread(fd, logged, sizeof logged - 1, 0);
    logged[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    CHECK(strstr(logged, "cloister.toml:2: unknown key 'chekcs' in [review]") != NULL);
    CHECK(strstr(logged, "check_interval") == NULL);
}

/* config_change_fn: appends "table.key;" to a buffer. */
static void s_collect(const char *table, const char *key, void *arg)
{
    char *list = arg;
    size_t len = strlen(list);
    snprintf(list + len, 512 - len, "%s.%s;", table, key);
}

/* config_each_change names every key whose value differs, and only those. */
static void test_each_change(void)
{
    config_t *a = parse_ok("[review]\nmode = \"strict\"\nchecks = [\"make\", \"lint\"]\n"
                           "[specialists.test-agent]\ntimeout = 60\n[x]\ngone = 1\n");
    config_t *b = parse_ok("[review]\nmode = \"strict\"\nchecks = [\"make\", \"lint2\"]\n"
                           "[specialists.test_agent]\ntimeout = 61\n[y]\nnew = true\n");
    char list[512] = "";
    config_each_change(a, b, s_collect, list);
    CHECK_STR(list, "review.checks;specialists.test-agent.timeout;x.gone;y.new;");
    list[0] = '\0';
    config_each_change(a, a, s_collect, list);
    CHECK_STR(list, "");
    config_destroy(&a);
    config_destroy(&b);
}

int main(void)
{
    const char *overrides[] = {"CLOISTER_IN", "CLOISTER_EVENTS", "CLOISTER_CONTROL",
                               "CLOISTER_SYNC", "CLOISTER_AGENT_COMMAND"};
    for (size_t i = 0; i < sizeof overrides / sizeof overrides[0]; i++)
        unsetenv(overrides[i]);

    test_defaults();
    test_value_kinds();
    test_known_keys_from_file();
    test_unknown_tables_kept();
    test_specialists();
    test_specialist_cli();
    test_syntax_errors();
    test_duplicates();
    test_type_errors();
    test_unknown_key_warned();
    test_buffer_edges();
    test_limits();
    test_each_change();

    const char *home = make_home();
    CHECK(home != NULL);
    if (home != NULL) {
        test_load_missing_file(home);
        test_load_file(home);
        test_environment(home);
        rmdir(home);
    }
    return check_exit_code("test_config");
}
