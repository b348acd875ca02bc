/* prompt: builds the prompt a specialist's agent gets for a task, from the template
 * prompts/<specialist>.md (common/agent/template.h), the context gatherers (common/agent/context.h) and
 * the role (common/agent/roles.h).
 *
 * Where the templates are (prompt_dir()): [agent] prompts_dir in cloister.toml if set, else
 * $CLOISTER_PROMPTS, else the prompts an installed program brings (<prefix>/share/cloister/
 * prompts beside its <prefix>/bin, from cmake --install), else the directory the program
 * was built with (services pass CLOISTER_PROMPTS_DIR, the source tree's prompts/, defined
 * by their CMakeLists.txt).
 *
 * A template may start with an HTML comment `<!-- ... -->` documenting its placeholders;
 * it is dropped before rendering. Rendering fails loudly on an unknown placeholder.
 *
 * Placeholders every template can use (filled by prompt_build() from the task):
 *   task_id, task_title, issue, specialist, priority
 *   description       payload.description, or "(no description given)"
 *   acceptance        payload.acceptance as a "- [ ] item" checklist
 *   task_text         payload.task (free text, e.g. from `pan specialists wake --task`);
 *                     for a hand-off, a pointer to the hand-off at the top
 * A task handed off (payload.handoff {from, from_task, reason, context}, made by the MCP
 * tool handoff_to) gets a prompt that starts, whatever its template, with
 *   [System] Handoff from <from> (task <from_task>) to <specialist>: <context>
 *   Reason: <reason>
 * and the request (payload.task), the context and the request fenced as data.
 *   role              the role section (roles.h)
 *   workspace, branch, target (default "main"), pr_url, files_changed
 *   repo_tree         the repository tree (fenced data, [context] tree_budget_chars)
 *   relevant_files    files ranked by the task's keywords, with fenced excerpts
 *                     ([context] relevant_files_limit, files_budget_chars)
 *   active_tasks      the other active tasks from the broker's context (fenced data)
 *   prior_attempts    the prior attempts of the issue (fenced data;
 *                     [context] session_context_limit bounds both lists)
 *   custom_instructions  [context] custom_instructions + .cloister/instructions.md (as
 *                     committed on the target branch, like the role: repo_files.h)
 * The repository these are gathered from is payload.workspace, else the caller's `worktree`
 * variable, else its `project` variable; without one the tree and files say so. A caller
 * that sets `workspace` itself (a service that checked the commit out in a worktree of its
 * own, and tells the agent to read there) gets repo_tree and relevant_files from that
 * directory; the role and custom_instructions still come from the repository.
 * Specialist-specific placeholders (diff, conflict_files, test_command, ...) come from the
 * caller; each template's header comment lists the ones it needs. */
#ifndef CLOISTER_PROMPT_H
#define CLOISTER_PROMPT_H

/* Longest task title put in a prompt, in bytes. */
#define PROMPT_TITLE_MAX 200

#include "config.h"
#include "template.h"

#include <jansson.h>
#include <stddef.h>

/* Writes the prompts directory into buf (see above). `builtin` is the compiled-in default
 * (may be NULL). Returns 0, FAILURE_NOT_FOUND when none is configured, or FAILURE_TOO_BIG. */
int prompt_dir(char *buf, size_t size, const config_t *config, const char *builtin);

/* Builds the prompt: loads <prompts_dir>/<specialist>.md, fills the common placeholders
 * into `vars` (the caller's specialist-specific variables, which it keeps owning; NULL for
 * none) listed above, and renders. Returns 0 with *out a new string the
 * caller frees, or FAILURE_NOT_FOUND (no template; the reason names the path),
 * FAILURE_INVALID (an unknown placeholder: "prompts/x.md: unknown placeholder {{y}} at line
 * N", or a bad role), FAILURE_IO, FAILURE_MEMORY; *out is then NULL. */
int prompt_build(char **out, const config_t *config, const char *prompts_dir,
                 const char *specialist, const json_t *task_json, template_vars_t *vars);

/* prompt_build() with the template's text given (borrowed) rather than loaded: `origin`
 * names where it came from in errors (a path, or "main:.cloister/review/x.md"). Returns
 * as prompt_build(). */
int prompt_render(char **out, const config_t *config, const char *template_text,
                  const char *origin, const char *specialist, const json_t *task_json,
                  template_vars_t *vars);

#endif
