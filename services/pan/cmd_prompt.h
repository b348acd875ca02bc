/* pan prompt: prints the prompt a task would get (services/pan/cmd_prompt.c). */
#ifndef PAN_CMD_PROMPT_H
#define PAN_CMD_PROMPT_H

#include "pan.h"

/* `pan prompt <specialist> <task-id> [--prompts-dir DIR]`: fetches the task (show_task),
 * builds the prompt <specialist>'s agent would get with common/agent/prompt.h, and prints it.
 * Runs nothing: what is only known while the job runs (the diff, conflict files, test
 * output) is shown as a note, and the broker's session context (other active tasks, prior
 * attempts), which is computed at dispatch, as empty. Returns the exit code. */
int cmd_prompt(const pan_t *pan, int argc, char **argv);

#endif
