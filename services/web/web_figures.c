/* web_figures: the last hour of the broker's figures (see web_figures.h). */
#include "web_figures.h"

#include "client.h"
#include "clock.h"
#include "msgjson.h"
#include "wire.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
    int64_t t; /* wall ms */
    double throughput, p50_ms, p99_ms;
    int64_t completed, queued, running, dead;
} sample_t;

struct web_figures_t {
    const web_t *web;
    pthread_t thread;
    pthread_mutex_t mutex;
    pthread_cond_t wake;
    bool stop;
    sample_t samples[WEB_FIGURES_SAMPLES];
    size_t count, next;
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

/* Asks the broker for its stats; false when it did not answer. */
static bool s_sample(const web_t *web, sample_t *out)
{
    client_t *client = client_new(web->control_ep, web->timeout_ms);
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_STATS);
    wire_msg_t *reply = NULL;
    bool ok = client != NULL && client_call(client, w, &reply) == 0;
    wire_writer_destroy(&w);
    client_destroy(&client);
    if (!ok)
        return false;
    json_t *stats = msgjson_from_object(wire_msg_object(reply, FIELD_DATA));
    wire_msg_destroy(&reply);
    const json_t *latency = json_object_get(stats, "commit_latency_ms");
    *out = (sample_t){.t = clock_wall_ms(),
                      .throughput = s_number(stats, "throughput_per_s"),
                      .p50_ms = s_number(latency, "p50"),
                      .p99_ms = s_number(latency, "p99"),
                      .completed = (int64_t)s_number(stats, "completed"),
                      .queued = s_queued(json_object_get(stats, "queues")),
                      .running = (int64_t)s_number(stats, "running"),
                      .dead = (int64_t)s_number(stats, "dead")};
    json_decref(stats);
    return true;
}

static void *s_run(void *arg)
{
    web_figures_t *self = arg;
    pthread_mutex_lock(&self->mutex);
    while (!self->stop) {
        pthread_mutex_unlock(&self->mutex);
        sample_t sample;
        bool ok = s_sample(self->web, &sample);
        pthread_mutex_lock(&self->mutex);
        if (ok) {
            self->samples[self->next] = sample;
            self->next = (self->next + 1) % WEB_FIGURES_SAMPLES;
            if (self->count < WEB_FIGURES_SAMPLES)
                self->count++;
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

web_figures_t *web_figures_start(const web_t *web)
{
    web_figures_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return NULL;
    self->web = web;
    pthread_mutex_init(&self->mutex, NULL);
    pthread_cond_init(&self->wake, NULL);
    if (pthread_create(&self->thread, NULL, s_run, self) != 0) {
        pthread_mutex_destroy(&self->mutex);
        pthread_cond_destroy(&self->wake);
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
    free(self);
    *self_p = NULL;
}

json_t *web_figures_json(web_figures_t *self)
{
    json_t *samples = json_array();
    pthread_mutex_lock(&self->mutex);
    size_t first = (self->next + WEB_FIGURES_SAMPLES - self->count) % WEB_FIGURES_SAMPLES;
    for (size_t i = 0; i < self->count; i++) {
        const sample_t *s = &self->samples[(first + i) % WEB_FIGURES_SAMPLES];
        json_array_append_new(
            samples, json_pack("{s:I, s:f, s:f, s:f, s:I, s:I, s:I, s:I}", "t", (json_int_t)s->t,
                               "throughput", s->throughput, "p50_ms", s->p50_ms, "p99_ms",
                               s->p99_ms, "completed", (json_int_t)s->completed, "queued",
                               (json_int_t)s->queued, "running", (json_int_t)s->running, "dead",
                               (json_int_t)s->dead));
    }
    pthread_mutex_unlock(&self->mutex);
    return json_pack("{s:i, s:o}", "every_ms", WEB_FIGURES_EVERY_MS, "samples", samples);
}
