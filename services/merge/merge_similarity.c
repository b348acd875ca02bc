/* merge_similarity: git's rename similarity and relevance rule as a libgit2 metric (see
 * merge_similarity.h). */
#include "merge_similarity.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define S_SPAN_MAX 64        /* git cuts a line longer than this into pieces */
#define S_HASH_BASE 107927u  /* git's modulus for a span's hash */
#define S_BINARY_PROBE 8000u /* git calls a file binary if a NUL is in its first 8000 bytes */
#define S_OURS 1u
#define S_THEIRS 2u

/* The bytes of a file's spans that share one hash. */
typedef struct {
    uint32_t hash;
    uint32_t bytes;
} s_span_t;

/* A file's signature: its spans by hash (sorted, one per hash), its size, and the sides
 * whose renames it may take part in (S_OURS, S_THEIRS). */
typedef struct {
    s_span_t *spans;
    size_t count;
    size_t size;
    unsigned int sides;
    char *basename; /* the file name after its last '/' */
} s_signature_t;

static int s_push(s_signature_t *sig, size_t *alloc, uint32_t hash, uint32_t bytes)
{
    if (sig->count == *alloc) {
        size_t grown_alloc = *alloc ? *alloc * 2 : 64;
        s_span_t *grown = realloc(sig->spans, grown_alloc * sizeof *grown);
        if (grown == NULL)
            return -1;
        sig->spans = grown;
        *alloc = grown_alloc;
    }
    sig->spans[sig->count++] = (s_span_t){hash, bytes};
    return 0;
}

static int s_compare_spans(const void *a, const void *b)
{
    uint32_t x = ((const s_span_t *)a)->hash, y = ((const s_span_t *)b)->hash;
    return (x > y) - (x < y);
}

/* Cuts buf into git's spans and sums their bytes by hash. */
static int s_hash_spans(s_signature_t *sig, const unsigned char *buf, size_t len)
{
    bool text = memchr(buf, 0, len < S_BINARY_PROBE ? len : S_BINARY_PROBE) == NULL;
    size_t alloc = 0;
    uint32_t acc1 = 0, acc2 = 0, n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned int c = buf[i];
        if (text && c == '\r' && i + 1 < len && buf[i + 1] == '\n')
            continue;
        uint32_t old1 = acc1;
        acc1 = (acc1 << 7) ^ (acc2 >> 25);
        acc2 = (acc2 << 7) ^ (old1 >> 25);
        acc1 += c;
        if (++n < S_SPAN_MAX && c != '\n')
            continue;
        if (s_push(sig, &alloc, (acc1 + acc2 * 0x61) % S_HASH_BASE, n) < 0)
            return -1;
        n = acc1 = acc2 = 0;
    }
    if (n > 0 && s_push(sig, &alloc, (acc1 + acc2 * 0x61) % S_HASH_BASE, n) < 0)
        return -1;
    if (sig->count > 1)
        qsort(sig->spans, sig->count, sizeof sig->spans[0], s_compare_spans);
    size_t kept = 0;
    for (size_t i = 0; i < sig->count; i++) {
        if (kept > 0 && sig->spans[kept - 1].hash == sig->spans[i].hash)
            sig->spans[kept - 1].bytes += sig->spans[i].bytes;
        else
            sig->spans[kept++] = sig->spans[i];
    }
    sig->count = kept;
    return 0;
}

/* True when `tree` holds `id` at `path`. */
static bool s_tree_has(const git_tree *tree, const char *path, const git_oid *id)
{
    git_tree_entry *entry = NULL;
    if (git_tree_entry_bypath(&entry, tree, path) < 0) {
        git_error_clear();
        return false;
    }
    bool same = git_oid_equal(git_tree_entry_id(entry), id);
    git_tree_entry_free(entry);
    return same;
}

/* The sides whose renames `file` may take part in. A rename source (the ancestor's file,
 * gone from one side) takes part only when the other side changed it too, so only when
 * neither side kept it as it was; a new file, in the renames of the side(s) that hold it. */
static unsigned int s_sides(const merge_similarity_t *sim, const git_diff_file *file)
{
    if (sim->ancestor == NULL)
        return S_OURS | S_THEIRS;
    bool in_ours = s_tree_has(sim->ours, file->path, &file->id);
    bool in_theirs = s_tree_has(sim->theirs, file->path, &file->id);
    if (s_tree_has(sim->ancestor, file->path, &file->id))
        return in_ours || in_theirs ? 0 : S_OURS | S_THEIRS;
    unsigned int sides = (in_ours ? S_OURS : 0) | (in_theirs ? S_THEIRS : 0);
    return sides != 0 ? sides : S_OURS | S_THEIRS;
}

static int s_buffer_signature(void **out, const git_diff_file *file, const char *buf, size_t buflen,
                              void *payload)
{
    s_signature_t *sig = calloc(1, sizeof *sig);
    if (sig == NULL)
        return -1;
    sig->size = buflen;
    sig->sides = s_sides(payload, file);
    const char *slash = strrchr(file->path, '/');
    sig->basename = strdup(slash != NULL ? slash + 1 : file->path);
    if (sig->basename == NULL || s_hash_spans(sig, (const unsigned char *)buf, buflen) < 0) {
        free(sig->basename);
        free(sig->spans);
        free(sig);
        git_error_set_oom();
        return -1;
    }
    *out = sig;
    return 0;
}

static void s_free_signature(void *sig, void *payload)
{
    (void)payload;
    if (sig != NULL) {
        free(((s_signature_t *)sig)->spans);
        free(((s_signature_t *)sig)->basename);
    }
    free(sig);
}

/* libgit2 calls it with the rename source first, the new file second. */
static int s_similarity(int *score, void *siga, void *sigb, void *payload)
{
    const merge_similarity_t *sim = payload;
    const s_signature_t *a = siga, *b = sigb;
    *score = 0;
    size_t max = a->size > b->size ? a->size : b->size;
    size_t delta = max - (a->size < b->size ? a->size : b->size);
    /* git leaves pairs whose sizes alone rule out the threshold unread */
    if ((a->sides & b->sides) == 0 || max == 0 || max * (100 - sim->threshold) < delta * 100)
        return 0;
    uint64_t shared = 0;
    size_t j = 0;
    for (size_t i = 0; i < a->count; i++) {
        while (j < b->count && b->spans[j].hash < a->spans[i].hash)
            j++;
        if (j < b->count && b->spans[j].hash == a->spans[i].hash)
            shared += a->spans[i].bytes < b->spans[j].bytes ? a->spans[i].bytes : b->spans[j].bytes;
    }
    *score = (int)(shared * 100 / max);
    /* git pairs a file with one of the same name first, when they are alike enough
     * (halfway from the threshold to identical), before it weighs the others */
    if (*score >= (int)(sim->threshold + (100 - sim->threshold) / 2) &&
        strcmp(a->basename, b->basename) == 0)
        *score = 100;
    return 0;
}

void merge_similarity_init(merge_similarity_t *sim, git_merge_options *opts,
                           const git_tree *ancestor, const git_tree *ours, const git_tree *theirs)
{
    memset(sim, 0, sizeof *sim);
    /* Merges hash blobs already read; libgit2 never asks for a file's signature. */
    sim->metric.buffer_signature = s_buffer_signature;
    sim->metric.free_signature = s_free_signature;
    sim->metric.similarity = s_similarity;
    sim->metric.payload = sim;
    if (ancestor != NULL && ours != NULL && theirs != NULL) {
        sim->ancestor = ancestor;
        sim->ours = ours;
        sim->theirs = theirs;
    }
    sim->threshold = opts->rename_threshold > 0 ? opts->rename_threshold : 50;
    opts->metric = &sim->metric;
}
