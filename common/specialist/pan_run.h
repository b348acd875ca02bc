/* pan_run: runs `pan` for a program that acts through it (cloister-mcp's tools,
 * cloister-web's approve) -- no shell: an argument vector -- and reads its answer.
 *
 * pan prints its answer as JSON on stdout with --json and says what went wrong on stderr
 * (`pan: <reason>`); its exit code says how it went (0 ok, 1 refused or the task failed,
 * 2 usage, 3 the broker did not answer, 4 a wait ran out). */
#ifndef CLOISTER_PAN_RUN_H
#define CLOISTER_PAN_RUN_H


#include <jansson.h>

/* Most bytes of pan's stdout kept. */
#define PAN_RUN_MAX_OUTPUT (16 * 1024 * 1024)

/* Where pan is and the broker it talks to (borrowed strings). */
typedef struct {
    const char *pan;
    const char *control_ep, *events_ep, *in_ep;
} pan_run_settings_t;

typedef struct {
    int exit_code;   /* pan's exit code; -1 when it did not run or was stopped */
    json_t *values;  /* every JSON value pan printed on stdout, in order (an array; owned) */
    char error[2048]; /* why it failed: pan's stderr (its last lines), or why it did not run */
} pan_run_t;

/* Runs pan with the broker's endpoints and `args` (NULL-terminated, after the endpoints),
 * for at most `timeout_s` seconds. Fills *run (free with pan_run_clear). Returns 0
 * when pan ran to its end (whatever its exit code), or a FAILURE_* code (with run->error
 * set) when it could not run or did not end in time. */
int pan_run(const pan_run_settings_t *settings, const char *const *args, int timeout_s,
            pan_run_t *run);

/* The last JSON value pan printed (borrowed), or NULL. */
json_t *pan_run_answer(const pan_run_t *run);

void pan_run_clear(pan_run_t *run);

#endif
