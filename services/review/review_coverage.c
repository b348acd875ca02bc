/* review_coverage: coverage reports against a diff's added lines (see review_coverage.h).
 *
 * The report is read into one entry per file: its path as the report spells it and its
 * instrumented lines, sorted by number with duplicates merged (cobertura lists a line
 * under its class and again under its method; the larger hit count wins). */
#include "review_coverage.h"

#include "failure.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    unsigned line;
    unsigned long hits;
} s_line_t;

typedef struct {
    char *path;
    s_line_t *lines;
    size_t count, cap;
} s_file_t;

typedef struct {
    s_file_t *files;
    size_t count, cap;
} s_report_t;

static void s_report_free(s_report_t *report)
{
    for (size_t i = 0; i < report->count; i++) {
        free(report->files[i].path);
        free(report->files[i].lines);
    }
    free(report->files);
    memset(report, 0, sizeof *report);
}

/* A new file entry for `path` (`len` bytes), or NULL when out of memory. */
static s_file_t *s_add_file(s_report_t *report, const char *path, size_t len)
{
    if (report->count == report->cap) {
        size_t cap = report->cap ? 2 * report->cap : 16;
        s_file_t *grown = realloc(report->files, cap * sizeof *grown);
        if (grown == NULL)
            return NULL;
        report->files = grown;
        report->cap = cap;
    }
    s_file_t *file = &report->files[report->count];
    memset(file, 0, sizeof *file);
    file->path = strndup(path, len);
    if (file->path == NULL)
        return NULL;
    report->count++;
    return file;
}

static int s_add_line(s_file_t *file, unsigned line, unsigned long hits)
{
    if (file->count == file->cap) {
        size_t cap = file->cap ? 2 * file->cap : 64;
        s_line_t *grown = realloc(file->lines, cap * sizeof *grown);
        if (grown == NULL)
            return failure_set(FAILURE_MEMORY, "out of memory");
        file->lines = grown;
        file->cap = cap;
    }
    file->lines[file->count++] = (s_line_t){line, hits};
    return 0;
}

/* lcov: "SF:<path>", "DA:<line>,<hits>[,<checksum>]", "end_of_record". */
static int s_parse_lcov(s_report_t *report, const char *text)
{
    s_file_t *file = NULL;
    for (const char *line = text; *line != '\0';) {
        size_t len = strcspn(line, "\r\n");
        if (strncmp(line, "SF:", 3) == 0) {
            file = s_add_file(report, line + 3, len - 3);
            if (file == NULL)
                return failure_set(FAILURE_MEMORY, "out of memory");
        } else if (strncmp(line, "end_of_record", 13) == 0) {
            file = NULL;
        } else if (file != NULL && strncmp(line, "DA:", 3) == 0) {
            unsigned number;
            unsigned long hits;
            if (sscanf(line + 3, "%u,%lu", &number, &hits) == 2 &&
                s_add_line(file, number, hits) != 0)
                return FAILURE_MEMORY;
        }
        line += len;
        line += strspn(line, "\r\n");
    }
    return 0;
}

/* The value of attribute `name` in the tag [tag, end): *len bytes at the result, or NULL. */
static const char *s_attribute(const char *tag, const char *end, const char *name, size_t *len)
{
    char key[32];
    snprintf(key, sizeof key, " %s=\"", name);
    size_t key_len = strlen(key);
    for (const char *at = tag; at + key_len <= end; at++) {
        if (memcmp(at, key, key_len) != 0)
            continue;
        const char *value = at + key_len;
        const char *close = memchr(value, '"', (size_t)(end - value));
        if (close == NULL)
            return NULL;
        *len = (size_t)(close - value);
        return value;
    }
    return NULL;
}

/* A class's file under the report's first <source> (cobertura names files relative to
 * one), "<source>/<filename>"; the filename alone without a source, or when it is
 * absolute. Returns a new file entry or NULL when out of memory. */
static s_file_t *s_add_class_file(s_report_t *report, const char *text, const char *name,
                                  size_t len)
{
    const char *source = strstr(text, "<source>");
    const char *source_end = source ? strstr(source, "</source>") : NULL;
    if (source == NULL || source_end == NULL || name[0] == '/')
        return s_add_file(report, name, len);
    source += strlen("<source>");
    char *joined = NULL;
    if (asprintf(&joined, "%.*s/%.*s", (int)(source_end - source), source, (int)len, name) < 0)
        return NULL;
    s_file_t *file = s_add_file(report, joined, strlen(joined));
    free(joined);
    return file;
}

/* cobertura: each <class filename="..."> ... </class> with its <line number="N"
 * hits="H" .../> elements. */
static int s_parse_cobertura(s_report_t *report, const char *text)
{
    const char *at = text;
    while ((at = strstr(at, "<class ")) != NULL) {
        const char *tag_end = strchr(at, '>');
        if (tag_end == NULL)
            break;
        const char *class_end = strstr(tag_end, "</class>");
        if (class_end == NULL)
            class_end = tag_end + strlen(tag_end);
        size_t len;
        const char *name = s_attribute(at, tag_end, "filename", &len);
        s_file_t *file = name ? s_add_class_file(report, text, name, len) : NULL;
        if (name != NULL && file == NULL)
            return failure_set(FAILURE_MEMORY, "out of memory");
        for (const char *line = tag_end; file != NULL && (line = strstr(line, "<line ")) != NULL &&
                                         line < class_end;
             line++) {
            const char *line_end = strchr(line, '>');
            size_t number_len, hits_len;
            const char *number =
                line_end ? s_attribute(line, line_end, "number", &number_len) : NULL;
            const char *hits = line_end ? s_attribute(line, line_end, "hits", &hits_len) : NULL;
            if (number != NULL && hits != NULL &&
                s_add_line(file, (unsigned)strtoul(number, NULL, 10), strtoul(hits, NULL, 10)) != 0)
                return FAILURE_MEMORY;
        }
        at = class_end;
    }
    return 0;
}

static int s_by_line(const void *a, const void *b)
{
    unsigned x = ((const s_line_t *)a)->line, y = ((const s_line_t *)b)->line;
    return x < y ? -1 : x > y;
}

/* Sorts each file's lines and merges the duplicates (keeping the larger hit count). */
static void s_normalise(s_report_t *report)
{
    for (size_t f = 0; f < report->count; f++) {
        s_file_t *file = &report->files[f];
        if (file->count == 0)
            continue;
        qsort(file->lines, file->count, sizeof *file->lines, s_by_line);
        size_t kept = 1;
        for (size_t i = 1; i < file->count; i++) {
            s_line_t *last = &file->lines[kept - 1];
            if (file->lines[i].line == last->line) {
                if (file->lines[i].hits > last->hits)
                    last->hits = file->lines[i].hits;
            } else {
                file->lines[kept++] = file->lines[i];
            }
        }
        file->count = kept;
    }
}

/* The report's entry for repository path `path`: the same path (under `root`, or with a
 * leading "./"), else one whose path ends with "/<path>"; NULL when none. */
static const s_file_t *s_find(const s_report_t *report, const char *root, const char *path)
{
    size_t root_len = root ? strlen(root) : 0;
    const s_file_t *ending = NULL;
    size_t path_len = strlen(path);
    for (size_t i = 0; i < report->count; i++) {
        const char *name = report->files[i].path;
        if (root_len > 0 && strncmp(name, root, root_len) == 0 && name[root_len] == '/')
            name += root_len + 1;
        if (strncmp(name, "./", 2) == 0)
            name += 2;
        if (strcmp(name, path) == 0)
            return &report->files[i];
        size_t name_len = strlen(name);
        if (ending == NULL && name_len > path_len && name[name_len - path_len - 1] == '/' &&
            strcmp(name + name_len - path_len, path) == 0)
            ending = &report->files[i];
    }
    return ending;
}

static const s_line_t *s_line(const s_file_t *file, unsigned number)
{
    s_line_t key = {number, 0};
    return bsearch(&key, file->lines, file->count, sizeof *file->lines, s_by_line);
}

/* Appends the uncovered added lines of one file (ascending) to *out as an entry. */
static int s_add_uncovered(review_diff_coverage_t *out, const char *path, const unsigned *lines,
                           size_t n)
{
    char *ranges = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&ranges, &len);
    if (f == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && lines[j + 1] == lines[j] + 1)
            j++;
        fprintf(f, "%s%u", i > 0 ? ", " : "", lines[i]);
        if (j > i)
            fprintf(f, "-%u", lines[j]);
        i = j + 1;
    }
    int closed = fclose(f);
    review_uncovered_t *grown =
        closed == 0 ? realloc(out->uncovered, (out->nuncovered + 1) * sizeof *grown) : NULL;
    if (grown != NULL)
        out->uncovered = grown;
    char *copy = grown != NULL ? strdup(path) : NULL;
    if (copy == NULL) {
        free(ranges);
        return failure_set(FAILURE_MEMORY, "out of memory");
    }
    out->uncovered[out->nuncovered++] =
        (review_uncovered_t){.path = copy, .first = lines[0], .count = n, .ranges = ranges};
    return 0;
}

/* The added lines of diff file `i` against the report. */
static int s_check_file(review_diff_coverage_t *out, const s_report_t *report, const char *root,
                        const review_diff_t *diff, size_t i)
{
    const s_file_t *file = diff->nadded[i] > 0 ? s_find(report, root, diff->paths[i]) : NULL;
    if (file == NULL)
        return 0;
    unsigned *missed = malloc(diff->nadded[i] * sizeof *missed);
    if (missed == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    size_t nmissed = 0;
    for (size_t k = 0; k < diff->nadded[i]; k++) {
        const s_line_t *line = s_line(file, diff->added[i][k]);
        if (line == NULL)
            continue;
        out->diff_lines++;
        if (line->hits > 0)
            out->diff_covered++;
        else
            missed[nmissed++] = line->line;
    }
    int rc = nmissed > 0 ? s_add_uncovered(out, diff->paths[i], missed, nmissed) : 0;
    free(missed);
    return rc;
}

int review_coverage_of_diff(review_diff_coverage_t *out, const char *text, const char *root,
                            const review_diff_t *diff)
{
    memset(out, 0, sizeof *out);
    out->total = out->diff = -1;
    s_report_t report = {0};
    bool cobertura = strstr(text, "<coverage") != NULL;
    int rc = cobertura ? s_parse_cobertura(&report, text) : s_parse_lcov(&report, text);
    size_t lines = 0, hit = 0;
    if (rc == 0)
        s_normalise(&report);
    for (size_t f = 0; rc == 0 && f < report.count; f++) {
        for (size_t i = 0; i < report.files[f].count; i++) {
            lines++;
            hit += report.files[f].lines[i].hits > 0;
        }
    }
    if (rc == 0 && lines == 0)
        rc = failure_set(FAILURE_INVALID,
                         "the coverage report is neither an lcov tracefile nor cobertura XML "
                         "(no instrumented line found)");
    for (size_t i = 0; rc == 0 && i < diff->nfiles; i++)
        rc = s_check_file(out, &report, root, diff, i);
    s_report_free(&report);
    if (rc != 0) {
        review_diff_coverage_clear(out);
        return rc;
    }
    out->total = 100.0 * (double)hit / (double)lines;
    if (out->diff_lines > 0)
        out->diff = 100.0 * (double)out->diff_covered / (double)out->diff_lines;
    return 0;
}

void review_diff_coverage_clear(review_diff_coverage_t *coverage)
{
    for (size_t i = 0; i < coverage->nuncovered; i++) {
        free(coverage->uncovered[i].path);
        free(coverage->uncovered[i].ranges);
    }
    free(coverage->uncovered);
    memset(coverage, 0, sizeof *coverage);
    coverage->total = coverage->diff = -1;
}
