/* broker_prior: the "prior attempts" of a dispatched task's session context -- the latest
 * attempts of the same issue by the same specialist -- each with what it left behind: its
 * outcome, error and end time, and, from the stored result of a task whose last attempt it
 * was, its NOTES, the files it changed (or named: resolved, failed, reviewed) and its
 * findings (a review's FINDINGS, a test run's FAILURES), so the next attempt knows what
 * was tried and not only how it ended. Each is bounded (BROKER_PRIOR_*) so the session
 * context stays small. */
#ifndef CLOISTER_BROKER_PRIOR_H
#define CLOISTER_BROKER_PRIOR_H

#include "broker_internal.h"

/* Most attempts listed, and most files and findings per attempt. */
#define BROKER_PRIOR_LIMIT 5
#define BROKER_PRIOR_FILES 20
#define BROKER_PRIOR_FINDINGS 10
/* Longest NOTES, finding and file name carried, in bytes (cut between characters). */
#define BROKER_PRIOR_NOTES_MAX 2000
#define BROKER_PRIOR_FINDING_MAX 300
#define BROKER_PRIOR_FILE_MAX 300

/* Writes the `prior` array of `task`'s session context into `w` (an open map): one map per
 * attempt, newest first, {task, attempt, outcome, error, finished} and, when known,
 * {notes, files: [str], findings: [str], findings_total}. Nothing is written for a task
 * without an issue but the empty array; a store failure is logged and leaves the array as
 * far as it got. Must not run while the broker's scratch writer is in use by `w`'s caller
 * for anything but `w` (it uses no writer of its own). */
void broker_prior_write(broker_t *self, wire_writer_t *w, const task_t *task);

#endif
