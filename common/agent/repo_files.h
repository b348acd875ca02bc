/* repo_files: a repository's own files that shape what an agent is told (its custom roles
 * .cloister/roles/<role>.md and its instructions .cloister/instructions.md), read as
 * committed on a branch or commit -- never from a working tree, where a checked-out
 * feature branch or an untracked file could speak for the repository.
 *
 * The reading goes through git, which common/agent does not link: a program that builds
 * prompts sets the reader once at start (repository_file_at(), repository.h). With no
 * reader set, no repository file is read at all and the built-in texts hold. */
#ifndef CLOISTER_REPO_FILES_H
#define CLOISTER_REPO_FILES_H

#include <stddef.h>

/* Reads `path` (relative to the repository's root) as committed at `rev` of the repository
 * containing `repo`: 0 with *text a new string (NULL when there is no such file), or a
 * negative FAILURE_* code. repository_file_at() has this shape. */
typedef int repo_files_reader_fn(const char *repo, const char *rev, const char *path,
                                 char **text);

/* Sets the process's reader (NULL: none). Call before building any prompt. */
void repo_files_set_reader(repo_files_reader_fn *reader);

/* The file `path` at `rev` of `repo`, at most `max` bytes of it (cut at a line end when
 * longer), trailing blank lines and spaces removed: a new string the caller frees, or NULL
 * when there is no reader, no `repo` or `rev`, no such file, or it cannot be read (a
 * warning is logged for that last case). */
char *repo_files_read(const char *repo, const char *rev, const char *path, size_t max);

#endif
