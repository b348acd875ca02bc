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
    if (strcmp(severity, "error") == 0)
        counts->errors++;
    else if (strcmp(severity, "warning") == 0)
        counts->warnings++;
    else
        counts->infos++;
    json_t *finding = json_pack("{s:s, s:s, s:I, s:s, s:s}", "severity", severity, "file", file,
                                "line", (json_int_t)line, "message", message, "source", source);
    if (finding == NULL) /* not UTF-8: keep the finding, not its text */
        finding = json_pack("{s:s, s:s, s:I, s:s, s:s}", "severity", severity, "file", "", "line",
                            (json_int_t)0, "message", "(finding text is not valid UTF-8)", "source",
                            source);
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

bool review_gate_open(review_mode_t mode, const char *verdict, const review_counts_t *counts)
{
    bool changes = verdict != NULL && strcasecmp(verdict, "CHANGES_REQUESTED") == 0;
    switch (mode) {
    case REVIEW_MODE_STRICT:
        return verdict != NULL && strcasecmp(verdict, "APPROVED") == 0 && counts->errors == 0 &&
               counts->warnings == 0 && counts->infos == 0;
    case REVIEW_MODE_NORMAL:
    case REVIEW_MODE_YOLO:
        return !changes && counts->errors == 0;
    case REVIEW_MODE_DISABLED:
        return true;
    }
    return false;
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

void review_findings_identify(json_t *findings)
{
    size_t i;
    json_t *finding;
    json_array_foreach(findings, i, finding)
    {
        const char *file = json_string_value(json_object_get(finding, "file"));
        const char *message = json_string_value(json_object_get(finding, "message"));
        char text[1024];
        s_normalise(message ? message : "", text, sizeof text);
        uint32_t hash = 2166136261u;
        for (const char *parts[] = {file ? file : "", "\n", text}, **p = parts; p < parts + 3; p++)
            for (const char *c = *p; *c != '\0'; c++)
                hash = (hash ^ (unsigned char)*c) * 16777619u;
        char id[16];
        snprintf(id, sizeof id, "f-%08x", (unsigned)hash);
        json_object_set_new(finding, "id", json_string(id));
    }
}
