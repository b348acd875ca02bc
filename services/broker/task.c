/* task: active task records and per-specialist queues (see task.h). */
#include "task.h"

#include <stdlib.h>
#include <string.h>

task_t *task_new(const char *id)
{
    task_t *self = calloc(1, sizeof *self);
    if (self != NULL)
        self->id = strdup(id);
    return self;
}

void task_destroy(task_t **self_p)
{
    task_t *self = *self_p;
    if (self == NULL)
        return;
    free(self->id);
    free(self->title);
    free(self->issue);
    free(self->source);
    free(self->group);
    free(self->parent);
    free(self->error);
    free(self->worker_id);
    free(self->worker_key);
    free(self->submitter_key);
    free(self->payload);
    free(self->files);
    free(self->context_entry);
    free(self->specialist);
    free(self->result);
    free(self->phase);
    free(self);
    *self_p = NULL;
}

void task_set_text(char **field, const char *value)
{
    free(*field);
    *field = value ? strdup(value) : NULL;
}

queue_t *queue_new(const char *name, int default_timeout_s, int default_max_attempts)
{
    queue_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return NULL;
    self->name = strdup(name);
    self->default_timeout_s = default_timeout_s;
    self->default_max_attempts = default_max_attempts;
    return self;
}

void queue_destroy(queue_t **self_p)
{
    queue_t *self = *self_p;
    if (self == NULL)
        return;
    free(self->name);
    free(self->paused);
    free(self);
    *self_p = NULL;
}

void queue_insert(queue_t *self, task_t *task)
{
    priority_t p = task->priority;
    /* New submits go to the tail; requeues walk back to their original place. */
    task_t *after = self->tail[p];
    while (after != NULL && after->order > task->order)
        after = after->prev;
    task->prev = after;
    task->next = after ? after->next : self->head[p];
    if (task->next)
        task->next->prev = task;
    else
        self->tail[p] = task;
    if (after)
        after->next = task;
    else
        self->head[p] = task;
    self->depth[p]++;
}

void queue_remove(queue_t *self, task_t *task)
{
    priority_t p = task->priority;
    if (task->prev)
        task->prev->next = task->next;
    else
        self->head[p] = task->next;
    if (task->next)
        task->next->prev = task->prev;
    else
        self->tail[p] = task->prev;
    task->prev = task->next = NULL;
    self->depth[p]--;
}

void queue_clear(queue_t *self)
{
    for (int p = 0; p < PRIORITY_COUNT; p++) {
        self->head[p] = self->tail[p] = NULL;
        self->depth[p] = 0;
    }
}

size_t queue_total(const queue_t *self)
{
    size_t total = 0;
    for (int p = 0; p < PRIORITY_COUNT; p++)
        total += self->depth[p];
    return total;
}
