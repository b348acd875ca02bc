/* pipeline: review → test → merge hand-offs (see pipeline.h). */
#include "pipeline.h"

#include "repository.h"

#include <stdio.h>
#include <string.h>

static pipeline_step_t s_step(const config_t *config, const char *key, pipeline_step_t fallback)
{
    const char *value = config_string(config, "pipeline", key, NULL);
    if (value == NULL)
        return fallback;
    if (strcmp(value, "merge") == 0)
        return PIPELINE_MERGE;
    if (strcmp(value, "test") == 0 && strcmp(key, "after_review") == 0)
        return PIPELINE_TEST;
    if (strcmp(value, "none") == 0)
        return PIPELINE_NONE;
    return fallback;
}

pipeline_step_t pipeline_after_review(const config_t *config)
{
    return s_step(config, "after_review", PIPELINE_MERGE);
}

pipeline_step_t pipeline_after_test(const config_t *config)
{
    return s_step(config, "after_test", PIPELINE_NONE);
}

static bool s_set(const char *value)
{
    return value != NULL && value[0] != '\0';
}

/* The payload every step gets: where the change is, the pinned commit, where it came from. */
static json_t *s_payload(const pipeline_change_t *change)
{
    json_t *payload = json_pack("{s:s, s:s, s:s, s:s}", "workspace", change->workspace, "branch",
                                change->branch, "target", change->target, "commit",
                                change->commit);
    if (payload == NULL)
        return NULL;
    if (s_set(change->merge_base))
        json_object_set_new(payload, "merge_base", json_string(change->merge_base));
    if (s_set(change->issue))
        json_object_set_new(payload, "issueId", json_string(change->issue));
    if (s_set(change->pr_url))
        json_object_set_new(payload, "prUrl", json_string(change->pr_url));
    if (s_set(change->review))
        json_object_set_new(payload, "pipeline",
                            json_pack("{s:s, s:s}", "review", change->review, "mode",
                                      s_set(change->mode) ? change->mode : ""));
    return payload;
}

/* A submit of `specialist` with id "<prefix>-<from>", `title` and the change's payload. */
static json_t *s_task(const pipeline_change_t *change, const char *specialist, const char *prefix,
                      const char *from, const char *title)
{
    char id[600];
    snprintf(id, sizeof id, "%s-%s", prefix, from);
    json_t *task = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o*}", "id", id, "specialist", specialist,
                             "priority", s_set(change->priority) ? change->priority : "normal",
                             "source", change->source, "title", title, "payload",
                             s_payload(change));
    if (task != NULL && s_set(change->issue))
        json_object_set_new(task, "issue", json_string(change->issue));
    return task;
}

json_t *pipeline_merge_task(const pipeline_change_t *change, const char *from)
{
    char title[800];
    snprintf(title, sizeof title, "Merge %s into %s", change->branch, change->target);
    json_t *task = s_task(change, "merge-agent", "merge", from, title);
    char group[4200];
    repository_merge_group(change->workspace, change->target, group, sizeof group);
    if (task != NULL && !change->queue)
        json_object_set_new(task, "group", json_string(group));
    return task;
}

json_t *pipeline_test_task(const pipeline_change_t *change, const char *from)
{
    char title[800];
    snprintf(title, sizeof title, "Test %s at %.12s", change->branch, change->commit);
    return s_task(change, "test-agent", "test", from, title);
}
