/* corpus_runner: replays a fuzz corpus through a target's LLVMFuzzerTestOneInput() as an
 * ordinary test, so every saved input (valid files, broken files, past crashes) is checked
 * on every build, with any compiler. Arguments are corpus directories or single files.
 * Exits 0 if every input ran, 1 if an input could not be read or none was found; a crash
 * or a sanitizer report fails the test by itself. */
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Runs one file through the target; returns 0, or -1 if it cannot be read. */
static int s_run_file(const char *path)
{
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        fprintf(stderr, "corpus_runner: cannot open %s\n", path);
        return -1;
    }
    size_t capacity = 4096, size = 0;
    uint8_t *data = malloc(capacity);
    while (data != NULL) {
        size += fread(data + size, 1, capacity - size, file);
        if (size < capacity)
            break;
        capacity *= 2;
        uint8_t *bigger = realloc(data, capacity);
        if (bigger == NULL) {
            free(data);
            data = NULL;
        } else {
            data = bigger;
        }
    }
    int failed = data == NULL || ferror(file);
    fclose(file);
    if (failed) {
        fprintf(stderr, "corpus_runner: cannot read %s\n", path);
        free(data);
        return -1;
    }
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 0;
}

/* Runs every regular file in `dir` (not hidden ones); adds to *count. Returns 0 or -1. */
static int s_run_dir(const char *dir, int *count)
{
    DIR *handle = opendir(dir);
    if (handle == NULL) {
        fprintf(stderr, "corpus_runner: cannot open directory %s\n", dir);
        return -1;
    }
    int rc = 0;
    struct dirent *entry;
    while ((entry = readdir(handle)) != NULL) {
        if (entry->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (s_run_file(path) != 0)
            rc = -1;
        else
            (*count)++;
    }
    closedir(handle);
    return rc;
}

int main(int argc, char **argv)
{
    int count = 0, rc = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            if (s_run_dir(argv[i], &count) != 0)
                rc = -1;
        } else if (s_run_file(argv[i]) != 0) {
            rc = -1;
        } else {
            count++;
        }
    }
    printf("corpus_runner: %d input(s) ran\n", count);
    return rc == 0 && count > 0 ? 0 : 1;
}
