/* reviewer_prompt: the prompts of the review's domain reviewers ([review] reviewers) and of
 * the synthesis that merges what they found -- shared by cloister-review, which runs them,
 * and `pan prompt --reviewer`, which shows them.
 *
 * A reviewer's template is, first found:
 *   1. .cloister/review/<name>.md as committed on the review's TARGET branch of the
 *      workspace (read from git, never the working tree: like the review mode, a branch
 *      under review cannot rewrite the reviewer that judges it);
 *   2. <prompts_dir>/review/<name>.md (prompts/review/ in the source tree).
 * The synthesis's is <prompts_dir>/review/synthesis.md (so no reviewer is named
 * "synthesis"). Templates are rendered by prompt_render() (common/agent/prompt.h) as the
 * review-agent's, so every common placeholder works; the caller sets the review's own
 * (reviewer, diff, checks, review_mode, scope, question, ...: see the templates' header
 * comments). */
#ifndef CLOISTER_REVIEWER_PROMPT_H
#define CLOISTER_REVIEWER_PROMPT_H

#include "config.h"
#include "template.h"

#include <jansson.h>
#include <stddef.h>

/* The longest reviewer name. */
#define REVIEWER_NAME_MAX 32
/* Where a repository keeps its own reviewer prompts, relative to its root. */
#define REVIEWER_REPO_DIR ".cloister/review"
/* The synthesis template's name in <prompts_dir>/review/. */
#define REVIEWER_SYNTHESIS "synthesis"

/* 0 when `name` can name a reviewer: a lowercase letter, then lowercase letters, digits,
 * '-' or '_', at most REVIEWER_NAME_MAX bytes, and not REVIEWER_SYNTHESIS; else
 * FAILURE_INVALID with the reason. */
int reviewer_name_check(const char *name);

/* Builds reviewer `name`'s prompt for the task `task_json` (borrowed) with the caller's
 * `vars` (borrowed; the common placeholders are added to it). `workspace` and `target`
 * (borrowed, may be NULL: no repository override) say where to look for the repository's
 * own template. Writes where the template came from into origin ("main:.cloister/review/
 * security.md" or a path). Returns 0 with *out a new string the caller frees, or
 * FAILURE_INVALID (bad name, unknown placeholder), FAILURE_NOT_FOUND (no template
 * anywhere), FAILURE_MEMORY; *out is then NULL. */
int reviewer_prompt_build(char **out, char *origin, size_t origin_size, const config_t *config,
                          const char *prompts_dir, const char *workspace, const char *target,
                          const char *name, const json_t *task_json, template_vars_t *vars);

/* Builds the synthesis prompt (<prompts_dir>/review/synthesis.md); as reviewer_prompt_build()
 * without the repository override. */
int reviewer_synthesis_prompt(char **out, const config_t *config, const char *prompts_dir,
                              const json_t *task_json, template_vars_t *vars);

#endif
