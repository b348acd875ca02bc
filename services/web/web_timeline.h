/* web_timeline: the stored events of some tasks, for a task's or an issue's timeline.
 *
 * The broker stores its events by seq only (PROTOCOL.md, replay), not by task. The events
 * of tasks that lived from `from_ms` to `to_ms` lie between two seqs: a binary search over
 * replay pages of one event finds the first event at `from_ms` (about 17 requests for the
 * 100,000 events kept), then pages are read forward until `to_ms`, keeping the events of
 * those tasks. So a timeline costs the events stored while its tasks lived, at most
 * WEB_TIMELINE_MAX_EVENTS read. */
#ifndef CLOISTER_WEB_TIMELINE_H
#define CLOISTER_WEB_TIMELINE_H

#include "web.h"

#include <stdint.h>

/* How many stored events one timeline reads at most. */
#define WEB_TIMELINE_MAX_EVENTS 50000
/* The progress lines a timeline keeps at most (the newest); the other events are all kept. */
#define WEB_TIMELINE_MAX_PROGRESS 1000
/* Events are stamped by the broker's clock when emitted: a margin either side. */
#define WEB_TIMELINE_SLACK_MS 2000

/* The events of the tasks whose ids are `tasks` (an array of strings, borrowed), stored
 * between `from_ms` and `to_ms` (wall ms), oldest first, each without its `result`:
 * {"events": [...], "truncated": bool, "progress_omitted": N}, truncated when
 * WEB_TIMELINE_MAX_EVENTS were read before `to_ms`; progress_omitted the older task.progress
 * events left out past WEB_TIMELINE_MAX_PROGRESS. Returns 200 with that body, or the
 * failure (502 when the broker does not answer). */
web_reply_t web_timeline(const web_t *web, const json_t *tasks, int64_t from_ms, int64_t to_ms);

#endif
