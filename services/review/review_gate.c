/* review_gate: findings and the merge gate (see review_gate.h). */
#include "review_gate.h"

#include "failure.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>


int review_mode_parse(review_mode_t *mode, const char *text)
{
    int parsed = review_mode_parse_name(text);
    if (parsed < 0)
        return failure_set(FAILURE_INVALID,
                           "review mode '%s': expected strict|normal|yolo|disabled",
                           text ? text : "");
    *mode = (review_mode_t)parsed;
    return 0;
}

/* The severity word at the start of text (lowercased into buf); returns what follows the
 * ':' or NULL when text does not start with "<word>:". */
static const char *s_severity(const char *text, char *buf, size_t size)
{
    size_t n = 0;
    while (isalpha((unsigned char)text[n]) && n + 1 < size) {
        buf[n] = (char)tolower((unsigned char)text[n]);
        n++;
    }
    buf[n] = '\0';
    if (n == 0 || text[n] != ':')
        return NULL;
    return text + n + 1;
}

/* True when word (len bytes) looks like a path, optionally with :line. */
static bool s_looks_like_location(const char *word, size_t len)
{
    bool dotted = false;
    for (size_t i = 0; i < len; i++) {
        if (word[i] == '/' || word[i] == '.')
            dotted = true;
        if ((unsigned char)word[i] < 0x21 || word[i] == '`' || word[i] == '"')
            return false;
    }
    return dotted;
}

/* Where `label` ("| detail:") starts in text, ignoring case, or NULL. */
static const char *s_find_label(const char *text, const char *label)
{
    for (const char *p = strchr(text, '|'); p != NULL; p = strchr(p + 1, '|')) {
        const char *word = p + 1;
        while (*word == ' ')
            word++;
        if (strncasecmp(word, label, strlen(label)) == 0)
            return p;
    }
    return NULL;
}

/* Copies text[from, to) into out (size bytes), trimmed. */
static void s_copy_trimmed(char *out, size_t size, const char *from, const char *to)
{
    while (from < to && (*from == ' ' || *from == '\t'))
        from++;
    while (to > from && (to[-1] == ' ' || to[-1] == '\t'))
        to--;
    snprintf(out, size, "%.*s", (int)(to - from), from);
}

/* Splits "title | detail: why | suggestion: how" (either part optional, in either order)
 * into its parts, each `size` bytes; absent parts are "". */
static void s_split_parts(const char *message, char *title, char *detail, char *suggestion,
                          size_t size)
{
    const char *end = message + strlen(message);
    const char *at_detail = s_find_label(message, "detail:");
    const char *at_suggestion = s_find_label(message, "suggestion:");
    const char *title_end = end;
    if (at_detail != NULL && at_detail < title_end)
        title_end = at_detail;
    if (at_suggestion != NULL && at_suggestion < title_end)
        title_end = at_suggestion;
    s_copy_trimmed(title, size, message, title_end);
    detail[0] = suggestion[0] = '\0';
    if (at_detail != NULL)
        s_copy_trimmed(detail, size, strchr(at_detail, ':') + 1,
                       at_suggestion != NULL && at_suggestion > at_detail ? at_suggestion : end);
    if (at_suggestion != NULL)
        s_copy_trimmed(suggestion, size, strchr(at_suggestion, ':') + 1,
                       at_detail != NULL && at_detail > at_suggestion ? at_detail : end);
}

json_t *review_finding_parse(const char *text, const char *source, review_counts_t *counts)
{
    char word[16];
    const char *rest = s_severity(text, word, sizeof word);
    const char *severity = "warning";
    if (rest != NULL &&
        (strcmp(word, "error") == 0 || strcmp(word, "info") == 0 || strcmp(word, "warning") == 0))
        severity = strcmp(word, "error") == 0  ? "error"
                   : strcmp(word, "info") == 0 ? "info"
                                               : "warning";
    else if (rest != NULL && (strcmp(word, "critical") == 0 || strcmp(word, "high") == 0))
        severity = "error";
    if (rest == NULL)
        rest = text;
    while (*rest == ' ' || *rest == '\t')
        rest++;
    size_t len = strcspn(rest, " \t");
    char file[1024] = "";
    long line = 0;
    const char *message = rest;
    if (len > 0 && len < sizeof file && s_looks_like_location(rest, len)) {
        memcpy(file, rest, len);
        file[len] = '\0';
        char *colon = strrchr(file, ':');
        if (colon != NULL && colon[1] != '\0' &&
            strspn(colon + 1, "0123456789") == strlen(colon + 1)) {
            line = strtol(colon + 1, NULL, 10);
            *colon = '\0';
        }
        /* "src/a.c:12:" keeps a trailing colon on the path. */
        size_t flen = strlen(file);
        if (flen > 0 && file[flen - 1] == ':')
            file[flen - 1] = '\0';
        message = rest + len;
        while (*message == ' ' || *message == '\t' || *message == '-')
            message++;
    }
    char title[4096], detail[4096], suggestion[4096];
    s_split_parts(message, title, detail, suggestion, sizeof title);
    if (strcmp(severity, "error") == 0)
        counts->errors++;
    else if (strcmp(severity, "warning") == 0)
        counts->warnings++;
    else
        counts->infos++;
    json_t *finding = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s}", "severity", severity,
                                "file", file, "line", (json_int_t)line, "message", title, "title",
                                title, "source", source, "reviewer", source);
    if (finding == NULL) /* not UTF-8: keep the finding, not its text */
        return json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s}", "severity", severity, "file", "",
                         "line", (json_int_t)0, "message", "(finding text is not valid UTF-8)",
                         "title", "(finding text is not valid UTF-8)", "source", source,
                         "reviewer", source);
    if (detail[0] != '\0')
        json_object_set_new(finding, "detail", json_string(detail));
    if (suggestion[0] != '\0')
        json_object_set_new(finding, "suggestion", json_string(suggestion));
    return finding;
}

bool review_finding_blocks(review_mode_t mode, const char *severity)
{
    switch (mode) {
    case REVIEW_MODE_STRICT:
        return true;
    case REVIEW_MODE_NORMAL:
    case REVIEW_MODE_YOLO:
        return severity != NULL && strcmp(severity, "error") == 0;
    case REVIEW_MODE_DISABLED:
        return false;
    }
    return true;
}

/* Appends "- <id> <file>:<line> <title> (suggestion: ...)\n" for one finding to f. */
static void s_note_finding(FILE *f, const json_t *finding)
{
    const char *id = json_string_value(json_object_get(finding, "id"));
    const char *file = json_string_value(json_object_get(finding, "file"));
    const char *title = json_string_value(json_object_get(finding, "title"));
    const char *suggestion = json_string_value(json_object_get(finding, "suggestion"));
    json_int_t line = json_integer_value(json_object_get(finding, "line"));
    fprintf(f, "- %s", id ? id : "?");
    if (file != NULL && file[0] != '\0')
        fprintf(f, line > 0 ? " %s:%lld" : " %s", file, (long long)line);
    fprintf(f, " %s", title ? title : json_string_value(json_object_get(finding, "message")));
    if (suggestion != NULL)
        fprintf(f, " (suggestion: %s)", suggestion);
    fputc('\n', f);
}

/* What the coding agent should do next, from the must_fix and should_fix findings and the
 * review's own notes (may be NULL). Caller frees; NULL if memory runs out. */
static char *s_notes(const json_t *findings, const json_t *must, const json_t *should,
                     const char *notes)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        return NULL;
    const json_t *lists[] = {must, should};
    const char *headings[] = {"Fix before merging", "Worth fixing (does not block)"};
    bool any = false;
    for (size_t k = 0; k < 2; k++) {
        if (json_array_size(lists[k]) == 0)
            continue;
        fprintf(f, "%s%s:\n", any ? "\n" : "", headings[k]);
        any = true;
        size_t i;
        const json_t *finding;
        json_array_foreach(findings, i, finding)
        {
            const char *id = json_string_value(json_object_get(finding, "id"));
            size_t j;
            const json_t *listed;
            json_array_foreach(lists[k], j, listed)
            {
                if (id != NULL && strcmp(id, json_string_value(listed)) == 0)
                    s_note_finding(f, finding);
            }
        }
    }
    if (!any)
        fputs("Nothing to fix.\n", f);
    if (notes != NULL && notes[0] != '\0')
        fprintf(f, "\nReviewer's notes: %s\n", notes);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

json_t *review_merge_gate(review_mode_t mode, const json_t *findings, const char *notes)
{
    json_t *must = json_array(), *should = json_array();
    bool error_blocks = false;
    size_t i;
    const json_t *finding;
    json_array_foreach(findings, i, finding)
    {
        const char *severity = json_string_value(json_object_get(finding, "severity"));
        const json_t *id = json_object_get(finding, "id");
        if (review_finding_blocks(mode, severity)) {
            json_array_append(must, (json_t *)id);
            error_blocks = error_blocks || (severity && strcmp(severity, "error") == 0);
        } else if (severity != NULL && strcmp(severity, "info") != 0) {
            json_array_append(should, (json_t *)id);
        }
    }
    const char *decision = error_blocks                    ? "block"
                           : json_array_size(must) > 0     ? "needs_changes"
                                                           : "approve";
    char *text = s_notes(findings, must, should, notes);
    json_t *gate = text != NULL ? json_pack("{s:s, s:o, s:o, s:s}", "decision", decision,
                                            "must_fix", must, "should_fix", should,
                                            "notes_for_coding_agent", text)
                                : NULL;
    if (gate == NULL) {
        json_decref(must);
        json_decref(should);
    }
    free(text);
    return gate;
}

bool review_merge_gate_open(const json_t *gate)
{
    const char *decision = json_string_value(json_object_get(gate, "decision"));
    return decision != NULL && strcmp(decision, "approve") == 0;
}

/* The message with letters and digits only, lowercased: what two wordings of one finding
 * share ("SQL injection!" and "sql  injection"). */
static void s_normalise(const char *message, char *out, size_t size)
{
    size_t n = 0;
    for (const char *c = message; *c != '\0' && n + 1 < size; c++) {
        if (isalnum((unsigned char)*c) || ((unsigned char)*c & 0x80))
            out[n++] = (char)tolower((unsigned char)*c);
    }
    out[n] = '\0';
}

static int s_rank(const char *severity)
{
    return strcmp(severity, "error") == 0 ? 2 : strcmp(severity, "warning") == 0 ? 1 : 0;
}

static void s_uncount(review_counts_t *counts, const char *severity)
{
    int rank = s_rank(severity);
    if (rank == 2)
        counts->errors--;
    else if (rank == 1)
        counts->warnings--;
    else
        counts->infos--;
}

static void s_count(review_counts_t *counts, const char *severity)
{
    int rank = s_rank(severity);
    if (rank == 2)
        counts->errors++;
    else if (rank == 1)
        counts->warnings++;
    else
        counts->infos++;
}

void review_counts_compute(const json_t *findings, review_counts_t *counts)
{
    *counts = (review_counts_t){0};
    size_t i;
    const json_t *finding;
    json_array_foreach(findings, i, finding)
    {
        const char *severity = json_string_value(json_object_get(finding, "severity"));
        s_count(counts, severity ? severity : "warning");
    }
}

static bool s_same_finding(const json_t *a, const json_t *b)
{
    const char *file_a = json_string_value(json_object_get(a, "file"));
    const char *file_b = json_string_value(json_object_get(b, "file"));
    json_int_t line_a = json_integer_value(json_object_get(a, "line"));
    json_int_t line_b = json_integer_value(json_object_get(b, "line"));
    if (strcmp(file_a ? file_a : "", file_b ? file_b : "") != 0 ||
        (line_a != 0 && line_b != 0 && line_a != line_b))
        return false;
    char text_a[1024], text_b[1024];
    const char *message_a = json_string_value(json_object_get(a, "message"));
    const char *message_b = json_string_value(json_object_get(b, "message"));
    s_normalise(message_a ? message_a : "", text_a, sizeof text_a);
    s_normalise(message_b ? message_b : "", text_b, sizeof text_b);
    return strcmp(text_a, text_b) == 0;
}

bool review_findings_add(json_t *findings, json_t *finding, review_counts_t *counts)
{
    size_t i;
    json_t *kept;
    json_array_foreach(findings, i, kept)
    {
        if (!s_same_finding(kept, finding))
            continue;
        const char *was = json_string_value(json_object_get(kept, "severity"));
        const char *now = json_string_value(json_object_get(finding, "severity"));
        s_uncount(counts, now ? now : "warning");
        if (was != NULL && now != NULL && s_rank(now) > s_rank(was)) {
            s_uncount(counts, was);
            s_count(counts, now);
            json_object_set_new(kept, "severity", json_string(now));
        }
        if (json_integer_value(json_object_get(kept, "line")) == 0)
            json_object_set(kept, "line", json_object_get(finding, "line"));
        json_decref(finding);
        return false;
    }
    json_array_append_new(findings, finding);
    return true;
}

/* True when a finding of `findings` already has the id `id`. */
static bool s_id_taken(const json_t *findings, const char *id)
{
    size_t i;
    const json_t *finding;
    json_array_foreach(findings, i, finding)
    {
        const char *other = json_string_value(json_object_get(finding, "id"));
        if (other != NULL && strcmp(other, id) == 0)
            return true;
    }
    return false;
}

void review_findings_identify(json_t *findings)
{
    size_t i;
    json_t *finding;
    json_array_foreach(findings, i, finding)
    {
        if (json_object_get(finding, "id") != NULL)
            continue;
        const char *file = json_string_value(json_object_get(finding, "file"));
        const char *message = json_string_value(json_object_get(finding, "message"));
        char text[1024];
        s_normalise(message ? message : "", text, sizeof text);
        uint32_t hash = 2166136261u;
        for (const char *parts[] = {file ? file : "", "\n", text}, **p = parts; p < parts + 3; p++)
            for (const char *c = *p; *c != '\0'; c++)
                hash = (hash ^ (unsigned char)*c) * 16777619u;
        char base[16], id[32];
        snprintf(base, sizeof base, "f-%08x", (unsigned)hash);
        snprintf(id, sizeof id, "%s", base);
        for (int n = 2; s_id_taken(findings, id); n++)
            snprintf(id, sizeof id, "%s-%d", base, n);
        json_object_set_new(finding, "id", json_string(id));
    }
}
