/* web_figures: the last hour and the last day of the broker's figures, for the dashboard's
 * charts.
 *
 * A thread asks the broker every WEB_FIGURES_EVERY_MS for its stats and its specialists
 * and keeps the last WEB_FIGURES_SAMPLES samples (an hour); every WEB_FIGURES_DAY_EVERY-th
 * one also goes into a day's series of WEB_FIGURES_DAY_SAMPLES. Per specialist a sample
 * holds its queue depth, its running tasks, the tasks it finished since the broker started
 * (done, failed, dead), its agent session's cost so far, and the median time from submit
 * to finish of its tasks that finished since the sample before. The broker keeps no history
 * of these, so the charts start when cloister-web does. */
#ifndef CLOISTER_WEB_FIGURES_H
#define CLOISTER_WEB_FIGURES_H

#include "web.h"

#define WEB_FIGURES_EVERY_MS 10000
#define WEB_FIGURES_SAMPLES 360
#define WEB_FIGURES_DAY_EVERY 6
#define WEB_FIGURES_DAY_SAMPLES 1440
/* The newest finished tasks of a specialist read per sample for its latency. */
#define WEB_FIGURES_LATENCY_TASKS 20

/* Starts sampling the broker `web` names (borrowed, outlives the figures). NULL when the
 * thread cannot start. */
web_figures_t *web_figures_start(const web_t *web);

/* Stops the thread and frees; nulls *self_p. */
void web_figures_stop(web_figures_t **self_p);

/* {"every_ms", "day_every_ms", "hour": [...], "day": [...]}, each series oldest first, each
 * sample {t, throughput, p50_ms, p99_ms, completed, queued, running, dead, specialists:
 * {name: {queued, running, finished, cost_usd, per_min, cost_per_h, latency_ms}}}: per_min
 * (tasks finished per minute) and cost_per_h (USD per hour) since the sample before in its
 * series (absent from the first), latency_ms only when some finished (a new object). */
json_t *web_figures_json(web_figures_t *self);

#endif
