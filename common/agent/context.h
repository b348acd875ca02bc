/* context: the context gatherers that fill a specialist's prompt, each under a budget.
 *
 *   context_checklist()        acceptance criteria as a Markdown checklist
 *   context_tree()             the repository tree, build outputs and VCS dirs left out
 *   context_keywords()         words of a task worth searching the repository for
 *   context_relevant_files()   repository files ranked by those words, with excerpts
 *   context_active_tasks()     the other active tasks the broker sent with the task
 *   context_prior_attempts()   the earlier attempts of the same issue
 *   context_custom_instructions()  [context] custom_instructions and the repository's
 *                              .cloister/instructions.md
 *
 * Trust. Text read from the repository (tree, file excerpts) or written by other agents
 * (titles, errors of other tasks) is fenced with template_fence_data() and labelled as data,
 * so nothing inside it reads as an instruction. The custom instructions are the project's
 * own configuration and are used as instructions, each part labelled with where it came
 * from (note that .cloister/instructions.md is read from the workspace given, i.e. the
 * branch being worked on).
 *
 * Every function returns 0 with *out a new string the caller frees, or a negative FAILURE_*
 * code with *out NULL. A budget counts bytes of the gathered text itself (fence lines and
 * labels are not counted); output cut at a budget says so in its last line. */
#ifndef CLOISTER_CONTEXT_H
#define CLOISTER_CONTEXT_H

#include "config.h"

#include <jansson.h>
#include <stddef.h>

/* Directory names never listed or searched: VCS data, dependencies and build outputs. */
extern const char *const CONTEXT_EXCLUDED_DIRS[];
/* The most keywords context_keywords() returns. */
#define CONTEXT_MAX_KEYWORDS 24
/* Files bigger than this are ranked by name only (their content is not searched). */
#define CONTEXT_GREP_MAX_FILE (64 * 1024)
/* The most files looked at by context_relevant_files(). */
#define CONTEXT_MAX_FILES 20000
/* The largest .cloister/instructions.md read. */
#define CONTEXT_INSTRUCTIONS_MAX (16 * 1024)

/* `acceptance` (a JSON array of strings; NULL or anything else counts as none) as lines
 * "- [ ] <item>". With no items: "(no acceptance criteria given)". Returns 0 or
 * FAILURE_MEMORY. */
int context_checklist(char **out, const json_t *acceptance);

/* The directory tree under `root`, sorted, one entry per line, indented two spaces per
 * level, directories with a trailing '/', excluded directories left out entirely and
 * symlinked directories not entered; at most `budget` bytes of entries, then "(tree cut at N
 * characters)". The result is fenced as data. Returns 0, FAILURE_NOT_FOUND (root is not a
 * directory) or FAILURE_MEMORY. */
int context_tree(char **out, const char *root, size_t budget);

/* The keywords of `text`: lowercase words of letters and digits (split at everything else,
 * also '_' and '-'), at least 3 characters, not a stop word, not all digits, each once, in
 * order of first appearance, at most CONTEXT_MAX_KEYWORDS. Sets *words (an array of *n
 * strings; the caller frees each string and the array; NULL when *n is 0). Returns 0 or
 * FAILURE_MEMORY. */
int context_keywords(char ***words, size_t *n, const char *text);

/* Frees what context_keywords() returned. */
void context_keywords_free(char **words, size_t n);

/* The files under `root` most related to `text`: each file scores 3 per keyword in its
 * name, 1 per keyword elsewhere in its path and 1 per keyword found in its content (text
 * files up to CONTEXT_GREP_MAX_FILE). The best `limit` files with a score above 0 (ties
 * by path) are listed as "- path (matches: a, b)", each followed by a fenced excerpt (the
 * lines around the first keyword hit) while `budget` allows, then by the path alone.
 * With no keywords or no match: "(no files matched the task's keywords)". Returns 0,
 * FAILURE_NOT_FOUND (root is not a directory) or FAILURE_MEMORY. */
int context_relevant_files(char **out, const char *root, const char *text, size_t limit,
                           size_t budget);

/* The broker's context["active"] (NULL or not an object: none) as a list
 * "- <id> [<specialist>] <title> (issue X; files: a, b)", at most `limit` entries plus
 * "(N more)", fenced as data; "(no other active tasks)" when empty. Returns 0 or
 * FAILURE_MEMORY. */
int context_active_tasks(char **out, const json_t *context, size_t limit);

/* The broker's context["prior"] as "- attempt N of <task>: <outcome> — <error>
 * (finished <time>)", each followed by what it left behind when the broker sent it
 * ("  notes: ...", "  files: a.c, b.c", "  findings:" and one "  - ..." line each), the last
 * `limit` entries, fenced as data; "(no prior attempts)" when empty. Returns 0 or
 * FAILURE_MEMORY. */
int context_prior_attempts(char **out, const json_t *context, size_t limit);

/* The project's instructions: [context] custom_instructions from `config` (may be NULL),
 * then `.cloister/instructions.md` as committed at `rev` (the target branch) of the
 * repository containing `repo` (repo_files.h: never a working tree's; at most
 * CONTEXT_INSTRUCTIONS_MAX bytes), each under a line naming its source; "(none)" when
 * there are neither. Returns 0 or FAILURE_MEMORY. */
int context_custom_instructions(char **out, const config_t *config, const char *repo,
                                const char *rev);

#endif
