/* web_figures: the last hour and day of the broker's figures (see web_figures.h). */
#include "web_figures.h"

#include "client.h"
#include "clock.h"
#include "session.h"
#include "web_broker.h"
#include "wire.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

/* A ring of samples, each a JSON object (owned). */
typedef struct {
    json_t **samples;
    size_t size, count, next;
} series_t;

struct web_figures_t {
    const web_t *web;
    pthread_t thread;
    pthread_mutex_t mutex;
    pthread_cond_t wake;
    bool stop;
    series_t hour, day;
    size_t ticks;
    int64_t last_t; /* the previous sample's time: latency counts tasks finished since */
};

static double s_number(const json_t *object, const char *key)
{
    const json_t *value = json_object_get(object, key);
    return json_is_number(value) ? json_number_value(value) : 0;
}

/* The queued tasks of every queue and priority in stats.queues. */
static int64_t s_queued(const json_t *queues)
{
    int64_t total = 0;
    const char *name, *priority;
    json_t *queue, *depth;
    json_object_foreach((json_t *)queues, name, queue)
    {
        json_object_foreach(queue, priority, depth) total += json_integer_value(depth);
    }
    return total;
}

static int s_compare_int(const void *a, const void *b)
{
    json_int_t x = *(const json_int_t *)a, y = *(const json_int_t *)b;
    return x < y ? -1 : x > y;
}

/* The median submit-to-finish time of `specialist`'s newest done tasks that finished after
 * `since`; -1 when none did. */
static json_int_t s_latency(client_t *client, const char *specialist, int64_t since)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_LIST_TASKS);
    wire_put_str(w, FIELD_SPECIALIST, specialist);
    wire_put_str(w, FIELD_STATE, "done");
    wire_put_int(w, FIELD_LIMIT, WEB_FIGURES_LATENCY_TASKS);
    json_t *tasks = NULL;
    bool truncated;
    int rc = web_broker_ask(client, w, &tasks, &truncated);
    wire_writer_destroy(&w);
    json_int_t times[WEB_FIGURES_LATENCY_TASKS];
    size_t n = 0, i;
    json_t *task;
    json_array_foreach(rc == 0 ? tasks : NULL, i, task)
    {
        json_int_t updated = json_integer_value(json_object_get(task, "updated"));
        json_int_t created = json_integer_value(json_object_get(task, "created"));
        if (updated > since && n < WEB_FIGURES_LATENCY_TASKS)
            times[n++] = updated - created;
    }
    json_decref(tasks);
    qsort(times, n, sizeof times[0], s_compare_int);
    return n > 0 ? times[n / 2] : -1;
}

/* One specialist's entry of a sample, from its list_specialists entry. */
static json_t *s_specialist(client_t *client, const json_t *entry, int64_t since)
{
    const char *name = json_string_value(json_object_get(entry, "name"));
    session_state_t session;
    double cost = name != NULL && session_name_valid(name) && session_load(name, &session) == 0
                      ? session.cost_usd
                      : 0;
    json_t *out = json_pack("{s:I, s:I, s:I, s:f}", "queued",
                            (json_int_t)s_number(entry, "queued"), "running",
                            (json_int_t)s_number(entry, "running"), "finished",
                            (json_int_t)(s_number(entry, "done") + s_number(entry, "failed") +
                                         s_number(entry, "dead")),
                            "cost_usd", cost);
    json_int_t latency = name != NULL ? s_latency(client, name, since) : -1;
    if (latency >= 0)
        json_object_set_new(out, "latency_ms", json_integer(latency));
    return out;
}

/* Asks the broker for a sample; NULL when it did not answer. */
static json_t *s_sample(const web_t *web, int64_t since)
{
    client_t *client = client_new(web->control_ep, web->timeout_ms);
    if (client == NULL)
        return NULL;
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_STATS);
    json_t *stats = NULL, *specialists = NULL;
    bool truncated;
    int rc = web_broker_ask(client, w, &stats, &truncated);
    wire_writer_start(w, MSG_LIST_SPECIALISTS);
    if (rc == 0)
        rc = web_broker_ask(client, w, &specialists, &truncated);
    wire_writer_destroy(&w);
    json_t *sample = NULL;
    if (rc == 0) {
        const json_t *latency = json_object_get(stats, "commit_latency_ms");
        json_t *each = json_object();
        size_t i;
        json_t *entry;
        json_array_foreach(specialists, i, entry)
        {
            const char *name = json_string_value(json_object_get(entry, "name"));
            if (name != NULL)
                json_object_set_new(each, name, s_specialist(client, entry, since));
        }
        sample = json_pack(
            "{s:I, s:f, s:f, s:f, s:I, s:I, s:I, s:I, s:o}", "t", (json_int_t)clock_wall_ms(),
            "throughput", s_number(stats, "throughput_per_s"), "p50_ms", s_number(latency, "p50"),
            "p99_ms", s_number(latency, "p99"), "completed",
            (json_int_t)s_number(stats, "completed"), "queued",
            (json_int_t)s_queued(json_object_get(stats, "queues")), "running",
            (json_int_t)s_number(stats, "running"), "dead", (json_int_t)s_number(stats, "dead"),
            "specialists", each);
    }
    json_decref(stats);
    json_decref(specialists);
    client_destroy(&client);
    return sample;
}

static void s_push(series_t *series, json_t *sample)
{
    json_decref(series->samples[series->next]);
    series->samples[series->next] = json_incref(sample);
    series->next = (series->next + 1) % series->size;
    if (series->count < series->size)
        series->count++;
}

static void *s_run(void *arg)
{
    web_figures_t *self = arg;
    pthread_mutex_lock(&self->mutex);
    while (!self->stop) {
        int64_t since = self->last_t;
        pthread_mutex_unlock(&self->mutex);
        json_t *sample = s_sample(self->web, since);
        pthread_mutex_lock(&self->mutex);
        if (sample != NULL) {
            self->last_t = (int64_t)json_integer_value(json_object_get(sample, "t"));
            s_push(&self->hour, sample);
            if (self->ticks++ % WEB_FIGURES_DAY_EVERY == 0)
                s_push(&self->day, sample);
            json_decref(sample);
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += WEB_FIGURES_EVERY_MS / 1000;
        while (!self->stop &&
               pthread_cond_timedwait(&self->wake, &self->mutex, &until) == 0)
            ;
    }
    pthread_mutex_unlock(&self->mutex);
    return NULL;
}

static bool s_series_init(series_t *series, size_t size)
{
    series->samples = calloc(size, sizeof *series->samples);
    series->size = size;
    return series->samples != NULL;
}

static void s_series_free(series_t *series)
{
    for (size_t i = 0; series->samples != NULL && i < series->size; i++)
        json_decref(series->samples[i]);
    free(series->samples);
}

web_figures_t *web_figures_start(const web_t *web)
{
    web_figures_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return NULL;
    self->web = web;
    self->last_t = clock_wall_ms();
    if (!s_series_init(&self->hour, WEB_FIGURES_SAMPLES) ||
        !s_series_init(&self->day, WEB_FIGURES_DAY_SAMPLES)) {
        s_series_free(&self->hour);
        s_series_free(&self->day);
        free(self);
        return NULL;
    }
    pthread_mutex_init(&self->mutex, NULL);
    pthread_cond_init(&self->wake, NULL);
    if (pthread_create(&self->thread, NULL, s_run, self) != 0) {
        pthread_mutex_destroy(&self->mutex);
        pthread_cond_destroy(&self->wake);
        s_series_free(&self->hour);
        s_series_free(&self->day);
        free(self);
        return NULL;
    }
    return self;
}

void web_figures_stop(web_figures_t **self_p)
{
    web_figures_t *self = *self_p;
    if (self == NULL)
        return;
    pthread_mutex_lock(&self->mutex);
    self->stop = true;
    pthread_cond_signal(&self->wake);
    pthread_mutex_unlock(&self->mutex);
    pthread_join(self->thread, NULL);
    pthread_mutex_destroy(&self->mutex);
    pthread_cond_destroy(&self->wake);
    s_series_free(&self->hour);
    s_series_free(&self->day);
    free(self);
    *self_p = NULL;
}

/* Adds a specialist's rates since `before` (its entry in the sample before) to `now`. A
 * count or a cost that went down (a broker restart, a new agent session) starts again. */
static void s_add_rates(json_t *now, const json_t *before, double minutes)
{
    if (before == NULL || minutes <= 0)
        return;
    double finished = s_number(now, "finished"), was = s_number(before, "finished");
    double cost = s_number(now, "cost_usd"), cost_was = s_number(before, "cost_usd");
    json_object_set_new(now, "per_min", json_real((finished >= was ? finished - was : finished) /
                                                  minutes));
    json_object_set_new(now, "cost_per_h",
                        json_real((cost >= cost_was ? cost - cost_was : cost) * 60 / minutes));
}

/* The series as JSON, oldest first, with each specialist's rates. */
static json_t *s_series_json(const series_t *series)
{
    json_t *out = json_array();
    size_t first = (series->next + series->size - series->count) % series->size;
    const json_t *previous = NULL;
    for (size_t i = 0; i < series->count; i++) {
        const json_t *sample = series->samples[(first + i) % series->size];
        json_t *copy = json_deep_copy(sample);
        json_int_t t = json_integer_value(json_object_get(sample, "t"));
        json_int_t before = json_integer_value(json_object_get(previous, "t"));
        double minutes = previous == NULL ? 0 : (double)(t - before) / 60000.0;
        const char *name;
        json_t *entry;
        json_object_foreach(json_object_get(copy, "specialists"), name, entry)
        {
            const json_t *specialists = json_object_get(previous, "specialists");
            s_add_rates(entry, json_object_get(specialists, name), minutes);
        }
        json_array_append_new(out, copy);
        previous = sample;
    }
    return out;
}

json_t *web_figures_json(web_figures_t *self)
{
    pthread_mutex_lock(&self->mutex);
    json_t *hour = s_series_json(&self->hour), *day = s_series_json(&self->day);
    pthread_mutex_unlock(&self->mutex);
    return json_pack("{s:i, s:i, s:o, s:o}", "every_ms", WEB_FIGURES_EVERY_MS, "day_every_ms",
                     WEB_FIGURES_EVERY_MS * WEB_FIGURES_DAY_EVERY, "hour", hour, "day", day);
}
