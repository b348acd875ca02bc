/* context: the context gatherers (see context.h). Output is built with open_memstream;
 * every budget is checked before a piece is written, so a piece never overshoots it. */
#include "context.h"

#include "failure.h"
#include "repo_files.h"
#include "template.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* The deepest directory level listed or searched. */
#define CONTEXT_MAX_DEPTH 12
/* An excerpt: lines before and after the first hit, and its largest size. */
#define CONTEXT_EXCERPT_BEFORE 2
#define CONTEXT_EXCERPT_AFTER 8
#define CONTEXT_EXCERPT_MAX 800
#define CONTEXT_PATH_MAX 4096

const char *const CONTEXT_EXCLUDED_DIRS[] = {
    ".git",   ".hg",      ".svn",   "node_modules",  "dist",        "build",  "out",
    "target", "coverage", ".next",  ".nuxt",         "__pycache__", ".venv",  "venv",
    ".tox",   ".gradle",  ".cache", ".pytest_cache", ".mypy_cache", "vendor", "bower_components",
    NULL};

/* Words too common in task descriptions to find files by (words under 3 letters are
 * dropped anyway). */
static const char *const s_stop_words[] = {
    "the",   "and",    "for",      "are",       "but",    "not",     "you",     "all",    "any",
    "can",   "has",    "have",     "had",       "its",    "our",     "out",     "was",    "were",
    "will",  "with",   "this",     "that",      "these",  "those",   "from",    "into",   "onto",
    "when",  "then",   "than",     "them",      "they",   "there",   "their",   "what",   "which",
    "who",   "why",    "how",      "where",     "each",   "also",    "only",    "should", "must",
    "would", "could",  "shall",    "may",       "might",  "does",    "did",     "done",   "doing",
    "make",  "makes",  "made",     "use",       "uses",   "used",    "using",   "add",    "adds",
    "added", "new",    "get",      "gets",      "set",    "sets",    "via",     "per",    "your",
    "able",  "about",  "after",    "before",    "again",  "some",    "such",    "very",   "more",
    "most",  "other",  "same",     "both",      "just",   "like",    "over",    "under",  "while",
    "been",  "being",  "because",  "without",   "within", "between", "instead", "task",   "issue",
    "work",  "works",  "need",     "needs",     "want",   "yes",     "one",     "two",    "now",
    "given", "ensure", "properly", "correctly", NULL};

/* True when `name` (one path component) is a directory the gatherers skip. */
static int s_excluded_dir(const char *name)
{
    for (size_t i = 0; CONTEXT_EXCLUDED_DIRS[i] != NULL; i++)
        if (strcmp(name, CONTEXT_EXCLUDED_DIRS[i]) == 0)
            return 1;
    return 0;
}

/* Closes the stream and hands over its buffer, fenced as data when label is not NULL. */
static int s_finish(char **out, FILE *f, char **bufp, const char *label)
{
    *out = NULL;
    int closed = fclose(f); /* sets *bufp */
    char *buf = *bufp;
    if (closed != 0 || buf == NULL) {
        free(buf);
        return failure_set(FAILURE_MEMORY, "out of memory gathering context");
    }
    if (label == NULL) {
        *out = buf;
        return 0;
    }
    *out = template_fence_data(label, buf);
    free(buf);
    return *out ? 0 : failure_set(FAILURE_MEMORY, "out of memory gathering context");
}

static int s_open(FILE **f, char **buf, size_t *len)
{
    *buf = NULL;
    *f = open_memstream(buf, len);
    return *f ? 0 : failure_set(FAILURE_MEMORY, "out of memory gathering context");
}

/* Writes text with line breaks and other control characters turned into spaces, so one
 * field stays on one line. */
static void s_put_line_text(FILE *f, const char *text)
{
    for (const char *p = text; *p; p++)
        fputc((unsigned char)*p < 0x20 ? ' ' : *p, f);
}

int context_checklist(char **out, const json_t *acceptance)
{
    FILE *f;
    char *buf;
    size_t len;
    if (s_open(&f, &buf, &len) != 0)
        return FAILURE_MEMORY;
    size_t items = 0;
    if (json_is_array(acceptance)) {
        size_t i;
        const json_t *item;
        json_array_foreach(acceptance, i, item)
        {
            const char *text = json_string_value(item);
            if (text == NULL || text[0] == '\0')
                continue;
            fputs("- [ ] ", f);
            s_put_line_text(f, text);
            fputc('\n', f);
            items++;
        }
    }
    if (items == 0)
        fputs("(no acceptance criteria given)\n", f);
    return s_finish(out, f, &buf, NULL);
}

/* ---- walking the repository ---- */

static int s_no_dots(const struct dirent *entry)
{
    return strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0;
}

/* Joins root and rel ("" for the root itself) into path. Returns -1 if it does not fit. */
static int s_join(char *path, size_t size, const char *root, const char *rel)
{
    int n = rel[0] ? snprintf(path, size, "%s/%s", root, rel) : snprintf(path, size, "%s", root);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

static int s_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

typedef struct {
    FILE *f;
    size_t used;
    size_t budget;
    int cut;
} tree_walk_t;

static void s_tree(tree_walk_t *walk, const char *root, const char *rel, int depth)
{
    char path[CONTEXT_PATH_MAX];
    if (depth > CONTEXT_MAX_DEPTH || s_join(path, sizeof path, root, rel) != 0)
        return;
    struct dirent **entries = NULL;
    int n = scandir(path, &entries, s_no_dots, alphasort);
    for (int i = 0; i < n; i++) {
        const char *name = entries[i]->d_name;
        char child_rel[CONTEXT_PATH_MAX], child[CONTEXT_PATH_MAX];
        int ok = snprintf(child_rel, sizeof child_rel, "%s%s%s", rel, rel[0] ? "/" : "", name) <
                     (int)sizeof child_rel &&
                 s_join(child, sizeof child, root, child_rel) == 0;
        struct stat st;
        if (!walk->cut && ok && lstat(child, &st) == 0 &&
            !(S_ISDIR(st.st_mode) && s_excluded_dir(name))) {
            int dir = S_ISDIR(st.st_mode);
            size_t line = (size_t)depth * 2 + strlen(name) + (dir ? 1 : 0) + 1;
            if (walk->used + line > walk->budget) {
                walk->cut = 1;
            } else {
                fprintf(walk->f, "%*s%s%s\n", depth * 2, "", name, dir ? "/" : "");
                walk->used += line;
                if (dir)
                    s_tree(walk, root, child_rel, depth + 1);
            }
        }
        free(entries[i]);
    }
    free(entries);
}

int context_tree(char **out, const char *root, size_t budget)
{
    *out = NULL;
    if (!s_is_dir(root))
        return failure_set(FAILURE_NOT_FOUND, "%s is not a directory", root);
    tree_walk_t walk = {.budget = budget};
    char *buf;
    size_t len;
    if (s_open(&walk.f, &buf, &len) != 0)
        return FAILURE_MEMORY;
    s_tree(&walk, root, "", 0);
    if (walk.used == 0 && !walk.cut)
        fputs("(empty)\n", walk.f);
    if (walk.cut)
        fprintf(walk.f, "(tree cut at %zu characters)\n", budget);
    return s_finish(out, walk.f, &buf, "repository tree");
}

/* ---- keywords ---- */

static int s_stop_word(const char *word)
{
    for (size_t i = 0; s_stop_words[i] != NULL; i++)
        if (strcmp(word, s_stop_words[i]) == 0)
            return 1;
    return 0;
}

void context_keywords_free(char **words, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(words[i]);
    free(words);
}

int context_keywords(char ***words_out, size_t *n_out, const char *text)
{
    *words_out = NULL;
    *n_out = 0;
    char **words = calloc(CONTEXT_MAX_KEYWORDS, sizeof *words);
    if (words == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    size_t n = 0;
    const char *p = text ? text : "";
    while (*p && n < CONTEXT_MAX_KEYWORDS) {
        while (*p && !isalnum((unsigned char)*p))
            p++;
        const char *start = p;
        int digits = 1;
        while (*p && isalnum((unsigned char)*p)) {
            if (!isdigit((unsigned char)*p))
                digits = 0;
            p++;
        }
        size_t len = (size_t)(p - start);
        if (len < 3 || len > 64 || digits)
            continue;
        char word[65];
        for (size_t i = 0; i < len; i++)
            word[i] = (char)tolower((unsigned char)start[i]);
        word[len] = '\0';
        int seen = s_stop_word(word);
        for (size_t i = 0; i < n && !seen; i++)
            seen = strcmp(words[i], word) == 0;
        if (seen)
            continue;
        words[n] = strdup(word);
        if (words[n] == NULL) {
            context_keywords_free(words, n);
            return failure_set(FAILURE_MEMORY, "out of memory");
        }
        n++;
    }
    if (n == 0) {
        free(words);
        words = NULL;
    }
    *words_out = words;
    *n_out = n;
    return 0;
}

/* ---- relevant files ---- */

typedef struct {
    char *path; /* relative to the root */
    int score;
    unsigned matched; /* bit i: keyword i matched */
} ranked_file_t;

typedef struct {
    ranked_file_t *files;
    size_t n, cap;
} file_list_t;

static int s_collect(file_list_t *list, const char *root, const char *rel, int depth)
{
    char path[CONTEXT_PATH_MAX];
    if (depth > CONTEXT_MAX_DEPTH || s_join(path, sizeof path, root, rel) != 0)
        return 0;
    struct dirent **entries = NULL;
    int n = scandir(path, &entries, s_no_dots, alphasort);
    int rc = 0;
    for (int i = 0; i < n; i++) {
        const char *name = entries[i]->d_name;
        char child_rel[CONTEXT_PATH_MAX], child[CONTEXT_PATH_MAX];
        struct stat st;
        if (rc == 0 && list->n < CONTEXT_MAX_FILES &&
            snprintf(child_rel, sizeof child_rel, "%s%s%s", rel, rel[0] ? "/" : "", name) <
                (int)sizeof child_rel &&
            s_join(child, sizeof child, root, child_rel) == 0 && lstat(child, &st) == 0) {
            if (S_ISDIR(st.st_mode) && !s_excluded_dir(name)) {
                rc = s_collect(list, root, child_rel, depth + 1);
            } else if (S_ISREG(st.st_mode)) {
                if (list->n == list->cap) {
                    size_t cap = list->cap ? list->cap * 2 : 256;
                    ranked_file_t *files = realloc(list->files, cap * sizeof *files);
                    if (files == NULL)
                        rc = FAILURE_MEMORY;
                    else
                        list->files = files, list->cap = cap;
                }
                if (rc == 0) {
                    ranked_file_t *file = &list->files[list->n];
                    memset(file, 0, sizeof *file);
                    file->path = strdup(child_rel);
                    if (file->path == NULL)
                        rc = FAILURE_MEMORY;
                    else
                        list->n++;
                }
            }
        }
        free(entries[i]);
    }
    free(entries);
    return rc;
}

/* Reads a small text file whole; NULL when too big, unreadable or binary (a NUL byte). */
static char *s_read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *text = malloc(CONTEXT_GREP_MAX_FILE + 1);
    size_t len = text ? fread(text, 1, CONTEXT_GREP_MAX_FILE + 1, f) : 0;
    fclose(f);
    if (text == NULL || len > CONTEXT_GREP_MAX_FILE || memchr(text, '\0', len) != NULL) {
        free(text);
        return NULL;
    }
    text[len] = '\0';
    return text;
}

static void s_score(ranked_file_t *file, const char *root, char **words, size_t nwords)
{
    const char *base = strrchr(file->path, '/');
    base = base ? base + 1 : file->path;
    char path[CONTEXT_PATH_MAX];
    char *content = s_join(path, sizeof path, root, file->path) == 0 ? s_read_text(path) : NULL;
    for (size_t i = 0; i < nwords; i++) {
        int hit = 0;
        if (strcasestr(base, words[i]) != NULL) {
            file->score += 3;
            hit = 1;
        } else if (strcasestr(file->path, words[i]) != NULL) {
            file->score += 1;
            hit = 1;
        }
        if (content != NULL && strcasestr(content, words[i]) != NULL) {
            file->score += 1;
            hit = 1;
        }
        if (hit)
            file->matched |= 1u << i;
    }
    free(content);
}

static int s_by_score(const void *a, const void *b)
{
    const ranked_file_t *x = a, *y = b;
    if (x->score != y->score)
        return y->score > x->score ? 1 : -1;
    return strcmp(x->path, y->path);
}

/* The lines around the first keyword hit in the file (NULL when none or unreadable). */
static char *s_excerpt(const char *root, const char *rel, char **words, size_t nwords)
{
    char path[CONTEXT_PATH_MAX];
    char *content = s_join(path, sizeof path, root, rel) == 0 ? s_read_text(path) : NULL;
    if (content == NULL)
        return NULL;
    const char *hit = NULL;
    for (size_t i = 0; i < nwords; i++) {
        const char *at = strcasestr(content, words[i]);
        if (at != NULL && (hit == NULL || at < hit))
            hit = at;
    }
    char *excerpt = NULL;
    if (hit != NULL) {
        const char *start = hit;
        for (int lines = 0; start > content; start--)
            if (start[-1] == '\n' && lines++ == CONTEXT_EXCERPT_BEFORE)
                break;
        const char *end = hit;
        for (int lines = 0; *end; end++)
            if (*end == '\n' && ++lines > CONTEXT_EXCERPT_AFTER)
                break;
        size_t len = (size_t)(end - start);
        if (len > CONTEXT_EXCERPT_MAX) {
            len = CONTEXT_EXCERPT_MAX;
            while (len > 0 && ((unsigned char)start[len] & 0xC0) == 0x80)
                len--;
        }
        excerpt = strndup(start, len);
    }
    free(content);
    return excerpt;
}

int context_relevant_files(char **out, const char *root, const char *text, size_t limit,
                           size_t budget)
{
    *out = NULL;
    if (!s_is_dir(root))
        return failure_set(FAILURE_NOT_FOUND, "%s is not a directory", root);
    char **words = NULL;
    size_t nwords = 0;
    if (context_keywords(&words, &nwords, text) != 0)
        return FAILURE_MEMORY;
    file_list_t list = {0};
    int rc = nwords > 0 ? s_collect(&list, root, "", 0) : 0;
    FILE *f = NULL;
    char *buf = NULL;
    size_t len;
    if (rc != 0 || s_open(&f, &buf, &len) != 0) {
        rc = failure_set(FAILURE_MEMORY, "out of memory gathering relevant files");
        goto out;
    }
    for (size_t i = 0; i < list.n; i++)
        s_score(&list.files[i], root, words, nwords);
    if (list.n > 0)
        qsort(list.files, list.n, sizeof *list.files, s_by_score);
    size_t shown = 0, used = 0;
    int cut = 0;
    for (size_t i = 0; i < list.n && shown < limit && list.files[i].score > 0; i++) {
        const ranked_file_t *file = &list.files[i];
        char head[CONTEXT_PATH_MAX + 512];
        int n = snprintf(head, sizeof head, "- %s (matches:", file->path);
        for (size_t w = 0; w < nwords && n > 0 && (size_t)n < sizeof head; w++)
            if (file->matched & (1u << w))
                n += snprintf(head + n, sizeof head - (size_t)n, "%s %s",
                              head[n - 1] == ':' ? "" : ",", words[w]);
        if (n < 0 || (size_t)n + 2 >= sizeof head)
            continue;
        if (used + (size_t)n + 2 > budget) {
            cut = 1;
            break;
        }
        fprintf(f, "%s)\n", head);
        used += (size_t)n + 2;
        shown++;
        char *excerpt = s_excerpt(root, file->path, words, nwords);
        if (excerpt != NULL && used + strlen(excerpt) <= budget) {
            char label[CONTEXT_PATH_MAX + 32];
            snprintf(label, sizeof label, "excerpt of %s", file->path);
            char *fenced = template_fence_data(label, excerpt);
            if (fenced != NULL)
                fputs(fenced, f);
            free(fenced);
            used += strlen(excerpt);
        }
        free(excerpt);
    }
    if (shown == 0 && !cut)
        fputs("(no files matched the task's keywords)\n", f);
    if (cut)
        fprintf(f, "(list cut at %zu characters)\n", budget);
    rc = s_finish(out, f, &buf, NULL);
out:
    for (size_t i = 0; i < list.n; i++)
        free(list.files[i].path);
    free(list.files);
    context_keywords_free(words, nwords);
    return rc;
}

/* ---- the broker's session context ---- */

static const char *s_str(const json_t *object, const char *key)
{
    const char *value = json_string_value(json_object_get(object, key));
    return value ? value : "";
}

int context_active_tasks(char **out, const json_t *context, size_t limit)
{
    const json_t *active = json_is_object(context) ? json_object_get(context, "active") : NULL;
    size_t total = json_is_array(active) ? json_array_size(active) : 0;
    FILE *f;
    char *buf;
    size_t len;
    if (total == 0) {
        *out = strdup("(no other active tasks)\n");
        return *out ? 0 : failure_set(FAILURE_MEMORY, "out of memory");
    }
    if (s_open(&f, &buf, &len) != 0)
        return FAILURE_MEMORY;
    for (size_t i = 0; i < total && i < limit; i++) {
        const json_t *task = json_array_get(active, i);
        fputs("- ", f);
        s_put_line_text(f, s_str(task, "id"));
        fputs(" [", f);
        s_put_line_text(f, s_str(task, "specialist"));
        fputs("] ", f);
        s_put_line_text(f, s_str(task, "title")[0] ? s_str(task, "title") : "(untitled)");
        const json_t *files = json_object_get(task, "files");
        size_t nfiles = json_is_array(files) ? json_array_size(files) : 0;
        if (s_str(task, "issue")[0] || nfiles > 0) {
            fputs(" (", f);
            if (s_str(task, "issue")[0]) {
                fputs("issue ", f);
                s_put_line_text(f, s_str(task, "issue"));
                if (nfiles > 0)
                    fputs("; ", f);
            }
            if (nfiles > 0)
                fputs("files: ", f);
            for (size_t j = 0; j < nfiles; j++) {
                const char *file = json_string_value(json_array_get(files, j));
                fputs(j ? ", " : "", f);
                s_put_line_text(f, file ? file : "?");
            }
            fputc(')', f);
        }
        fputc('\n', f);
    }
    if (total > limit)
        fprintf(f, "(%zu more)\n", total - limit);
    return s_finish(out, f, &buf, "list of other active tasks");
}

/* What a prior attempt left behind, under its line: its notes, the files it changed and
 * its findings (each on one line). */
static void s_put_left_behind(FILE *f, const json_t *attempt)
{
    if (s_str(attempt, "notes")[0]) {
        fputs("  notes: ", f);
        s_put_line_text(f, s_str(attempt, "notes"));
        fputc('\n', f);
    }
    const json_t *files = json_object_get(attempt, "files");
    if (json_array_size(files) > 0) {
        fputs("  files:", f);
        size_t i;
        const json_t *file;
        json_array_foreach(files, i, file)
        {
            fputs(i ? ", " : " ", f);
            s_put_line_text(f, json_string_value(file) ? json_string_value(file) : "?");
        }
        fputc('\n', f);
    }
    const json_t *findings = json_object_get(attempt, "findings");
    if (json_array_size(findings) == 0)
        return;
    json_int_t total = json_integer_value(json_object_get(attempt, "findings_total"));
    if (total > (json_int_t)json_array_size(findings))
        fprintf(f, "  findings (%zu of %lld):\n", json_array_size(findings), (long long)total);
    else
        fputs("  findings:\n", f);
    size_t i;
    const json_t *finding;
    json_array_foreach(findings, i, finding)
    {
        fputs("  - ", f);
        s_put_line_text(f, json_string_value(finding) ? json_string_value(finding) : "?");
        fputc('\n', f);
    }
}

int context_prior_attempts(char **out, const json_t *context, size_t limit)
{
    const json_t *prior = json_is_object(context) ? json_object_get(context, "prior") : NULL;
    size_t total = json_is_array(prior) ? json_array_size(prior) : 0;
    FILE *f;
    char *buf;
    size_t len;
    if (total == 0) {
        *out = strdup("(no prior attempts)\n");
        return *out ? 0 : failure_set(FAILURE_MEMORY, "out of memory");
    }
    if (s_open(&f, &buf, &len) != 0)
        return FAILURE_MEMORY;
    if (total > limit)
        fprintf(f, "(%zu earlier attempts not shown)\n", total - limit);
    for (size_t i = total > limit ? total - limit : 0; i < total; i++) {
        const json_t *attempt = json_array_get(prior, i);
        fprintf(f, "- attempt %lld",
                (long long)json_integer_value(json_object_get(attempt, "attempt")));
        if (s_str(attempt, "task")[0]) {
            fputs(" of ", f);
            s_put_line_text(f, s_str(attempt, "task"));
        }
        fputs(": ", f);
        s_put_line_text(f, s_str(attempt, "outcome")[0] ? s_str(attempt, "outcome") : "?");
        if (s_str(attempt, "error")[0]) {
            fputs(" - ", f);
            s_put_line_text(f, s_str(attempt, "error"));
        }
        json_int_t finished = json_integer_value(json_object_get(attempt, "finished"));
        if (finished > 0) {
            time_t seconds = (time_t)(finished / 1000);
            struct tm tm;
            char when[32];
            if (gmtime_r(&seconds, &tm) != NULL &&
                strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm) > 0)
                fprintf(f, " (finished %s)", when);
        }
        fputc('\n', f);
        s_put_left_behind(f, attempt);
    }
    return s_finish(out, f, &buf, "list of prior attempts");
}

/* ---- custom instructions ---- */

int context_custom_instructions(char **out, const config_t *config, const char *repo,
                                const char *rev)
{
    FILE *f;
    char *buf;
    size_t len;
    if (s_open(&f, &buf, &len) != 0)
        return FAILURE_MEMORY;
    int parts = 0;
    const char *configured =
        config ? config_string(config, "context", "custom_instructions", "") : "";
    if (configured[0] != '\0') {
        fprintf(f, "From cloister.toml [context] custom_instructions:\n%s%s", configured,
                configured[strlen(configured) - 1] == '\n' ? "" : "\n");
        parts++;
    }
    char *text = repo_files_read(repo, rev, ".cloister/instructions.md", CONTEXT_INSTRUCTIONS_MAX);
    if (text != NULL && text[0] != '\0') {
        fprintf(f, "%sFrom the repository's .cloister/instructions.md on %s:\n%s\n",
                parts ? "\n" : "", rev, text);
        parts++;
    }
    free(text);
    if (parts == 0)
        fputs("(none)\n", f);
    return s_finish(out, f, &buf, NULL);
}
