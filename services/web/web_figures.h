/* web_figures: the last hour of the broker's figures, for the dashboard's charts.
 *
 * A thread asks the broker for its stats every WEB_FIGURES_EVERY_MS and keeps the last
 * WEB_FIGURES_SAMPLES samples (an hour): throughput, commit latency, and the task counts.
 * The broker keeps no history of these, so the charts start when cloister-web does. */
#ifndef CLOISTER_WEB_FIGURES_H
#define CLOISTER_WEB_FIGURES_H

#include "web.h"

#define WEB_FIGURES_EVERY_MS 10000
#define WEB_FIGURES_SAMPLES 360

/* Starts sampling the broker `web` names (borrowed, outlives the figures). NULL when the
 * thread cannot start. */
web_figures_t *web_figures_start(const web_t *web);

/* Stops the thread and frees; nulls *self_p. */
void web_figures_stop(web_figures_t **self_p);

/* {"every_ms", "samples": [{t, throughput, p50_ms, p99_ms, completed, queued, running,
 * dead}, ...]} oldest first (a new object). */
json_t *web_figures_json(web_figures_t *self);

#endif
